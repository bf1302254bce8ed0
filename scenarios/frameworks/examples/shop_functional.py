"""The shop's checkout with LangGraph's functional API: one ``@task`` per planned call, in plan order."""

from __future__ import annotations

from langgraph.func import entrypoint, task

import killpoint.frameworks as kp
from killpoint.frameworks.langgraph import run

from .shop_tools import card_charged, charge_card, read_cart, send_email, write_receipt

read = task(kp.step("c1", read_cart))
receipt = task(kp.step("c2", write_receipt))
charge = task(kp.step("c3", charge_card, probe=card_charged))
email = task(kp.step("c4", send_email))


@entrypoint()
def checkout(_inputs: dict[str, str]) -> dict[str, object]:
    cart = read().result()
    return {"receipt": receipt(cart).result(), "charge": charge(cart).result(), "email": email(cart).result()}


if __name__ == "__main__":
    run(checkout, {}, thread_id="checkout", durability="sync")  # LangGraph's default is "async"
