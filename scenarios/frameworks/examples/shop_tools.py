"""A shop's own tools, plain Python: read the cart, write the receipt, charge the card, email the customer.

Their world is a folder: killpoint's fake world when killpoint runs them ($KILLPOINT_WORLD), whose
``files/`` holds the files a scenario seeds. Nothing here knows about killpoint.
"""

from __future__ import annotations

import os
from pathlib import Path


def world() -> Path:
    return Path(os.environ.get("KILLPOINT_WORLD", "shop-world"))


def read_cart() -> str:
    return (world() / "files" / "cart.txt").read_text().strip()


def write_receipt(cart: str) -> str:
    """Overwrites the receipt: doing it twice leaves one receipt."""
    (world() / "receipt.txt").write_text(f"receipt: {cart}\n")
    return "receipt.txt"


def charge_card(cart: str) -> str:
    """Every call is one more charge on the card."""
    with open(world() / "charges.txt", "a") as charges:
        charges.write(f"charged 9.80 EUR for {cart}\n")
    return f"charge for {cart}"


def card_charged(cart: str) -> str | None:
    """Read-only: the charge for this cart if the card was already charged, else None."""
    charges = world() / "charges.txt"
    return f"charge for {cart}" if charges.exists() and f"for {cart}\n" in charges.read_text() else None


def send_email(cart: str) -> str:
    """Every call sends one more email."""
    with open(world() / "outbox.txt", "a") as outbox:
        outbox.write(f"Your order of {cart} is on its way\n")
    return "sent"
