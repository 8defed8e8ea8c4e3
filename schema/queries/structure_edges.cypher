// Every parent edge of a collection that was current at batch $as_of.
MATCH (c:Node {collection: $collection})-[r:PARENT]->(p:Node)
WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of)
RETURN c.id AS child, p.id AS parent
ORDER BY child, parent
