// Mentions under a cluster as of batch $as_of.
MATCH path = (c:Node {collection: $collection, id: $id})<-[:PARENT*1..]-(m:Mention)
WHERE all(r IN relationships(path) WHERE r.since <= $as_of AND (r.until IS NULL OR r.until > $as_of))
RETURN DISTINCT m.id AS id
ORDER BY id
