"""Share groups (KIP-932, "queues for Kafka"): the share-partition state machine
(`partition`), share-group membership and its assignor (`group`), and the share-group
state a coordinator persists (`state`)."""
