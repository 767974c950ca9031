-- World store, schema version 8 ({backend}): each object's first writer kept on its own row.
--
-- An object's episode and the entry whose commit carried it were rows of their own, in
-- `object_episodes` and `commit_objects`: two more index pages at a random place per object
-- per commit, beside the object's own two. Now an object's first write records both on its
-- `objects` row (`entry_index` is NULL when that write was not a commit's), and the two tables
-- hold only the rest: the same bytes written later for another episode, or carried by another
-- entry's commit. Objects stored before this version keep both columns NULL and all their rows.
ALTER TABLE objects ADD COLUMN episode TEXT;
ALTER TABLE objects ADD COLUMN entry_index {int};
