// Every mention's stable entity as of batch $as_of (what `er export entities` writes).
MATCH (m:Node:Mention {collection: $collection})-[i:IN_ENTITY]->(e:Entity)
WHERE i.since <= $as_of AND (i.until IS NULL OR i.until > $as_of)
RETURN m.id AS mention, e.id AS entity
ORDER BY mention
