"""The connectors, each a plugin whose `start` builds one Spark Structured Streaming query:
`file_stream` (Kafka's FileStreamSource and FileStreamSink, the quickstart pair), `lake`
(topics to Parquet files). `file_lines` is the Spark data source FileStreamSource reads with;
`sink_query` is what every sink shares (the topics as a stream from the committed offsets)."""
