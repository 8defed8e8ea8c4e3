// Users and `er query --mention` find a record's node by the id they ingested: the
// index is V0008's `Node(external_id)`. This file created `Mention(collection,
// external_id)`, which never took effect on FalkorDB (see V0008), and now holds no
// statement.
