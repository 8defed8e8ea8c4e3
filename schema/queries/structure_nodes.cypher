// Every node of a collection that existed at batch $as_of.
MATCH (n:Node {collection: $collection})
WHERE n.created <= $as_of AND (n.retired IS NULL OR n.retired > $as_of)
RETURN n.id AS id, n.leaf AS leaf, n.size AS size, n.score AS score,
       n.level_lo AS level_lo, n.level_hi AS level_hi
ORDER BY id
