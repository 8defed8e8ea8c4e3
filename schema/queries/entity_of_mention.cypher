// The stable entity of the mention ingested as $external_id, as of batch $as_of, and
// every member of that entity then (one row per member). A membership belongs to
// batch b when since <= b < until (until null: still current).
MATCH (m:Node:Mention {collection: $collection, external_id: $external_id})-[i:IN_ENTITY]->(e:Entity)
WHERE i.since <= $as_of AND (i.until IS NULL OR i.until > $as_of)
MATCH (o:Mention)-[j:IN_ENTITY]->(e)
WHERE j.since <= $as_of AND (j.until IS NULL OR j.until > $as_of)
RETURN e.id AS entity, e.since AS minted, o.external_id AS member, o.id AS node
ORDER BY member
