"""A user's own checkout (read the cart, write the receipt, charge the card, email the customer) as a LangGraph
StateGraph, LangGraph tasks and a DBOS workflow, each step instrumented with ``killpoint.frameworks``."""
