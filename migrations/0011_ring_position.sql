-- svc schema version 11: the ring's position outside MVCC.
--
-- The generation and slot that producers write into, as generation * 1000 + slot. A sequence is read
-- without a snapshot (its one tuple is overwritten in place), so a producer in a REPEATABLE READ
-- transaction whose snapshot predates a rotation still writes into the new current slot, and a sealed
-- slot stops receiving rows once the producers that read it before the rotation have committed (ADR 016,
-- "Claims skip exhausted slots").
create sequence if not exists {{qs}}.ring_position minvalue 0 start 0;

select setval('{{qs}}.ring_position', r.generation * 1000 + r.slot, true)
  from {{qs}}.ring_rotations r order by r.generation desc limit 1;
