"""Where runs happen: the session and its worker pool (``pool``), the runner that launches incarnations, the
rendezvous that waits for the kill's moment, scratch folders, shared prefixes, process trees.
"""
