"""A program that needs 3 ranks, started on another number: init must say so."""
from tinyspec import distributed as dist

dist.init(world_size=3)
