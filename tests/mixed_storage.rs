//! Columns whose cells mix storage classes (issue 27: "a REAL column with some `''` cells"):
//! SQLite keeps each value's class and orders NULL < numbers < text, so a text cell in a REAL
//! column sorts above every number and compares greater than any numeric literal, while the
//! numbers keep comparing by value. Each query is lowered against a fixture holding such
//! columns (a REAL and an INTEGER column with `''` cells, an untyped column of numbers and
//! words), run on the executor and compared with real SQLite's answer on the same database.

mod lowering_support;

use std::path::Path;

use lowering_support as judge;

const DB: &str = "store/store.sqlite";

fn fixture(dir: &Path) {
    std::fs::create_dir_all(dir.join("store")).unwrap();
    let conn = rusqlite::Connection::open(dir.join(DB)).unwrap();
    conn.execute_batch(
        "CREATE TABLE item (id INTEGER, name TEXT, price REAL, stock INTEGER, code, shop_id INTEGER);
         CREATE TABLE shop (shop_id INTEGER, city TEXT, rating REAL);
         INSERT INTO item VALUES
           (1,'a',9.5,3,5,1), (2,'b',10.0,'','n/a',1), (3,'c','',7,12,2), (4,'d',100,'',5,2),
           (5,'e',NULL,2,'x',1), (6,'f',2.25,7,7,3), (7,'g',75,40,'',3);
         INSERT INTO shop VALUES (1,'Oslo',4.5), (2,'Rome',''), (3,'Lima',3.0);",
    )
    .unwrap();
    // The premise: SQLite kept the '' cells as text in the numeric columns.
    let classes: Vec<String> = conn
        .prepare("SELECT DISTINCT typeof(price) FROM item ORDER BY 1")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(classes, ["null", "real", "text"]);
}

fn run_all(queries: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    fixture(dir.path());
    for q in queries {
        judge::check(dir.path(), DB, q);
    }
}

#[test]
fn a_mixed_storage_column_orders_its_cells_by_their_own_class() {
    run_all(&[
        "SELECT name FROM item ORDER BY price DESC",
        "SELECT name FROM item ORDER BY price ASC",
        "SELECT name, price FROM item ORDER BY price DESC LIMIT 2",
        "SELECT name FROM item WHERE price IS NOT NULL ORDER BY price LIMIT 3",
        "SELECT name FROM item ORDER BY stock DESC, name",
        "SELECT MAX(price) FROM item",
        "SELECT MIN(price) FROM item",
        "SELECT MAX(stock) FROM item",
        "SELECT name FROM item ORDER BY code",
    ]);
}

#[test]
fn a_mixed_storage_column_compares_text_cells_above_every_number() {
    run_all(&[
        "SELECT name FROM item WHERE price > 9.6",
        "SELECT name FROM item WHERE price < 50",
        "SELECT name FROM item WHERE price >= 10",
        "SELECT name FROM item WHERE price BETWEEN 5 AND 80",
        "SELECT name FROM item WHERE stock = 7",
        "SELECT name FROM item WHERE stock != 7",
        "SELECT COUNT(*) FROM item WHERE code > 6",
        "SELECT name FROM item WHERE code = 5",
        "SELECT name FROM item WHERE price IN (9.5, 100)",
        "SELECT T1.name FROM item AS T1 JOIN shop AS T2 ON T1.shop_id = T2.shop_id WHERE T2.rating > 4",
        "SELECT T1.name FROM item AS T1 JOIN shop AS T2 ON T1.shop_id = T2.shop_id ORDER BY T2.rating DESC, T1.name",
    ]);
}

#[test]
fn a_mixed_storage_column_groups_and_counts_each_value_once() {
    run_all(&[
        "SELECT DISTINCT code FROM item",
        "SELECT code, COUNT(*) FROM item GROUP BY code",
        "SELECT COUNT(DISTINCT stock) FROM item",
        "SELECT COUNT(price) FROM item",
    ]);
}
