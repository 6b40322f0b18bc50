"""The group coordinator (`coordinator.GroupCoordinator`): classic groups (JoinGroup/SyncGroup,
`classic_protocol`, state in `classic`), KIP-848 consumer groups (`consumer_protocol`, state in
`consumer`, `assignors`), committed offsets (`offset_manager`, `offsets`, the
`__consumer_offsets` writes and replay in `store`, `loader`) and the lag it reports (`lag`).
Requests and answers are the types of `api`."""
