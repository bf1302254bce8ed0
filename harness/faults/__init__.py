"""What a kill does: the nemesis that SIGKILLs an incarnation and records it, power loss, and the lazy
file system that drops what was never fsynced.
"""
