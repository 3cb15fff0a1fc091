-- The local stack's PostgreSQL (docker-compose.yml): the database "iceberg" of the Iceberg JDBC
-- catalog is made by the image (POSTGRES_DB); this adds the checkpoint store's database. The
-- store creates its tables on first use.
CREATE DATABASE cdc_state OWNER lake;
