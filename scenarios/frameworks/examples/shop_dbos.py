"""The shop's checkout as a DBOS workflow: one step per planned call, registered under its call id."""

from __future__ import annotations

from dbos import DBOS

from killpoint.frameworks.dbos import run_workflow, step

from .shop_tools import card_charged, charge_card, read_cart, send_email, write_receipt

read = step("c1", read_cart)
receipt = step("c2", write_receipt)
charge = step("c3", charge_card, probe=card_charged)
email = step("c4", send_email)


@DBOS.workflow()
def checkout() -> dict[str, object]:
    cart = read()
    return {"receipt": receipt(cart), "charge": charge(cart), "email": email(cart)}


if __name__ == "__main__":
    run_workflow(checkout, workflow_id="checkout")
