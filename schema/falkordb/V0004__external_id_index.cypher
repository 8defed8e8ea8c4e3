// Users and `er query --mention` find a record's node by the id they ingested.
CREATE INDEX FOR (n:Mention) ON (n.collection, n.external_id);
