"""The partitions this node hosts and the requests that read and write them, as Kafka's
ReplicaManager does: `manager.ReplicaManager` follows the metadata image (create, delete, leader
epochs), appends produce requests through storage's log validator (`append_to`) and serves
fetches (`fetch_messages`, consumers today, followers next); `partition.Partition` holds one
log with its leader epoch, ISR, high watermark and last stable offset; `purgatory` parks the
requests that wait (DelayedFetch now, DelayedProduce for acks=all with followers);
`fetch_params` is what a fetch asks for (FetchParams, FetchIsolation)."""
