-- Run once by the mysql image when it initialises an empty data directory
-- (/docker-entrypoint-initdb.d), in the database MYSQL_DATABASE (shop).

-- The user the binlog loads connect as (connection mysql_binlog_default).
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY 'cdc-local-secret';
-- REPLICATION SLAVE: read the binlog like a replica.
-- REPLICATION CLIENT: SHOW BINARY LOG STATUS and SHOW BINARY LOGS (positions, lag, retention).
-- RELOAD: FLUSH TABLES WITH READ LOCK, held for a moment when an initial snapshot starts.
GRANT REPLICATION SLAVE, REPLICATION CLIENT, RELOAD ON *.* TO 'cdc'@'%';
-- SELECT: the snapshot reads the tables; information_schema.COLUMNS shows only granted tables.
GRANT SELECT ON shop.* TO 'cdc'@'%';

-- A small sample schema.
CREATE DATABASE IF NOT EXISTS shop;
USE shop;

CREATE TABLE customers (
    id         INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    email      VARCHAR(255) NOT NULL UNIQUE,
    name       VARCHAR(255) NOT NULL,
    created_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
);

CREATE TABLE orders (
    id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    customer_id INT UNSIGNED    NOT NULL,
    status      ENUM('new', 'paid', 'shipped', 'cancelled') NOT NULL DEFAULT 'new',
    total       DECIMAL(12, 2)  NOT NULL,
    attributes  JSON            NULL,
    updated_at  TIMESTAMP(3)    NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
    KEY idx_orders_customer (customer_id),
    CONSTRAINT fk_orders_customer FOREIGN KEY (customer_id) REFERENCES customers (id)
);

INSERT INTO customers (email, name) VALUES
    ('ada@example.com', 'Ada Lovelace'),
    ('grace@example.com', 'Grace Hopper'),
    ('edsger@example.com', 'Edsger Dijkstra');

INSERT INTO orders (customer_id, status, total, attributes) VALUES
    (1, 'paid', 129.90, JSON_OBJECT('channel', 'web')),
    (2, 'new', 15.00, NULL),
    (3, 'shipped', 72.35, JSON_OBJECT('channel', 'store', 'gift', TRUE));
