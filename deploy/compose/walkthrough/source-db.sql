-- The walk-through's source database in deploy/compose.yaml's PostgreSQL, run once by the
-- image's first start (/docker-entrypoint-initdb.d). As on the development machines: database
-- `test`, user `postgres` (here with the password the walk-through's connection sends), and
-- the table deploy/walkthrough_db.py creates (tests/deploy/test_compose.py keeps them equal).
CREATE ROLE postgres LOGIN PASSWORD 'unused-with-trust';
CREATE DATABASE test OWNER postgres;
\connect test
SET ROLE postgres;
CREATE TABLE IF NOT EXISTS walkthrough_accounts (
        id int PRIMARY KEY, email text, balance numeric(12,2), opened timestamptz DEFAULT now());
INSERT INTO walkthrough_accounts (id, email, balance)
       VALUES (1, 'a@example.com', 10.50), (2, 'b@example.com', 7)
       ON CONFLICT DO NOTHING;
