"""A partition's log on disk, in Kafka's layout: segments with sparse offset and time indexes,
recovery after a crash, leader epochs, checkpoints, and the manager of a data directory's logs.

Plain files only: no sockets, no asyncio; callers move blocking work off the event loop.
"""
