"""The shop's checkout as a LangGraph StateGraph, each node a killpoint step named after its planned call."""

from __future__ import annotations

from typing import Any, TypedDict

from langgraph.graph import START, StateGraph

import killpoint.frameworks as kp
from killpoint.frameworks.langgraph import run

from .shop_tools import card_charged, charge_card, read_cart, send_email, write_receipt


class Order(TypedDict, total=False):
    cart: str
    receipt: str
    charge: str
    email: str


def charged(order: Order) -> dict[str, Any] | None:
    """The probe of c3: the charge already made for this cart, as the node's update, or None."""
    charge = card_charged(order["cart"])
    return {"charge": charge} if charge else None


builder = StateGraph(Order).add_sequence([
    kp.step("c1", lambda order: {"cart": read_cart()}),
    kp.step("c2", lambda order: {"receipt": write_receipt(order["cart"])}),
    kp.step("c3", lambda order: {"charge": charge_card(order["cart"])}, probe=charged),
    kp.step("c4", lambda order: {"email": send_email(order["cart"])}),
])
builder.add_edge(START, "c1")

if __name__ == "__main__":
    run(builder, {}, thread_id="checkout", durability="sync")  # LangGraph's default is "async"
