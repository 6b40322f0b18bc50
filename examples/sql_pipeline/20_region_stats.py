"""Views and total load time per region, as a changelog: the latest record per key is the count."""

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from odradek.spark.pipeline import flow, var


@flow(topic=var("stats"), outputMode="update")
def region_stats(spark: SparkSession) -> DataFrame:
    per_region = spark.table("views").groupBy("region").agg(
        F.count(F.lit(1)).alias("views"), F.sum("ms").alias("total_ms"))
    return per_region.select(F.col("region").alias("key"),
                             F.to_json(F.struct("region", "views", "total_ms")).alias("value"))
