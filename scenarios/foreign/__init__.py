"""A runtime in another language (Node.js) that keeps its own task store, judged through the scenario's [journal] mapping."""
