// The stored k-NN edges of a set of mention node ids ($left), either direction,
// written at or before batch $as_of: the candidate pairs around those mentions.
UNWIND $left AS a
MATCH (x:Node:Mention {collection: $collection, id: a})-[n:NEAR]-(y:Mention {collection: $collection})
WHERE n.since <= $as_of
RETURN DISTINCT x.id AS left, y.id AS right, n.sim AS sim
ORDER BY left, right
