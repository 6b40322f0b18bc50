-- Page views arrive as JSON on the topic ${input}. Bots and broken timings are dropped;
-- the rest is the view `views`, which the flows below and 20_region_stats.py read.
CREATE SOURCE raw_views OPTIONS (subscribe '${input}', startingOffsets 'earliest');

CREATE TEMPORARY VIEW views AS
SELECT v.user, v.region, v.page, v.ms
FROM (
  SELECT from_json(CAST(value AS STRING),
                   'user BIGINT, region STRING, page STRING, ms BIGINT, bot BOOLEAN') AS v
  FROM raw_views
)
WHERE NOT v.bot AND v.ms >= 0;

-- Slow page loads, one record each, keyed by user, written exactly once.
CREATE FLOW slow_views AS
INSERT INTO TOPIC ${slow} OPTIONS (deliveryGuarantee 'exactly-once')
SELECT CAST(user AS STRING) AS key,
       to_json(named_struct('user', user, 'page', page, 'ms', ms)) AS value
FROM views
WHERE ms > ${slow_ms};
