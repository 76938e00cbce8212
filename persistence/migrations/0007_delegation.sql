-- 0007_delegation: delegation chains. A task or message created inside a
-- running task (its caller's facade descends from that task's agent, as
-- the daemon finds from the process tree) keeps that task as its parent;
-- a task also keeps its chain: the hops from the top-level task down to
-- its parent, oldest first, as a JSON array of {task_id, caller, target}
-- (model.Hop). Both are written once, when the row is stored.
--
-- Rows stored before this migration are top-level: no parent ('') and an
-- empty chain ('[]'), which is what the relay recorded for every task then.
ALTER TABLE tasks ADD COLUMN parent_task_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN chain TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(chain));
ALTER TABLE messages ADD COLUMN parent_task_id TEXT NOT NULL DEFAULT '';
