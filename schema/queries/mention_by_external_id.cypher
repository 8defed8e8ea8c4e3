// The node of the mention ingested under external id $external_id.
MATCH (m:Node:Mention {collection: $collection, external_id: $external_id})
RETURN m.id AS id
