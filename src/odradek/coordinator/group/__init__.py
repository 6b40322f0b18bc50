"""Consumer groups: classic (JoinGroup/SyncGroup) and KIP-848, offsets, lag."""
