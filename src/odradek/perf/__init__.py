"""The perf tools: what kafka-producer-perf-test, kafka-consumer-perf-test and Kafka's
EndToEndLatency measure, over confluent-kafka (`confluent`) or odradek's own columnar client
(`columnar_producer`, `columnar_consumer`, `e2e_columnar`), in one process or several
(`parallel`). `runs` holds the entry points `odradek bench` calls; `results` the result types
every tool returns. perf imports client and protocol; nothing below imports perf.
"""
