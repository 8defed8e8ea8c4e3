// Every entity the mention ingested as $external_id belonged to, oldest first, with
// each merge or split (BECAME event) that touched that entity while the mention was
// in it: the event that brought the mention in (batch = since), events during its
// stay, and the one that took it out (batch = until). No event: the row's event
// columns are null.
MATCH (m:Node:Mention {collection: $collection, external_id: $external_id})-[i:IN_ENTITY]->(e:Entity)
OPTIONAL MATCH (e)-[b:BECAME]-(:Entity)
WHERE b.batch >= i.since AND (i.until IS NULL OR b.batch <= i.until)
RETURN e.id AS entity, i.since AS since, i.until AS until, b.batch AS batch, b.kind AS kind,
       startNode(b).id AS from_entity, endNode(b).id AS to_entity
ORDER BY since, entity, batch, from_entity, to_entity
