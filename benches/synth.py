"""Synthetic corpora in Spider's layout (not a test; benches only). Two modes, both deterministic
(seeded):

- `synth.py OUT_DIR [TRIPS]` (issue 17): one large database, so the join step's memory bound is
  measured where BIRD-scale data stresses it. OUT_DIR/dev.json (questions with gold SQL),
  OUT_DIR/tables.json (empty) and OUT_DIR/database/bikes_big/bikes_big.sqlite: a bike_1-like
  schema with a `trip` fact table of TRIPS rows (default 1,000,000) and its `station` and
  `weather` dimensions; the questions join the fact table with each dimension, filter, group and
  aggregate.
- `synth.py OUT_DIR --databases N [--seed S] [--questions MEDIAN] [--rows MEDIAN]` (issue 34,
  shard balance): N databases (`db000` …), each of one of four table shapes (a dimension and a
  fact table referencing it, one shape with a second dimension), its fact-table rows and its
  question count drawn log-normal (rows: median 2,000, σ 1.2, 20 to 60,000; questions: median
  25, σ 1.0, 4 to 300; Spider dev's 20 databases hold 4 to 162 questions), so a few databases are
  much larger than the rest. Gold SQL of the kinds Spider has, with values drawn from the data:
  filters (=, >, <, LIKE, BETWEEN), joins, COUNT/AVG/SUM/MIN/MAX with GROUP BY (and HAVING),
  ORDER BY … LIMIT, DISTINCT. Writes dev.json, tables.json (Spider's schema records: readable
  and original column names, types, primary and foreign keys) and database/<db>/<db>.sqlite.
"""
import argparse
import json
import math
import os
import random
import sqlite3



def bikes_big(out, trips):
    """The one large bike_1-like database (the original mode, issue 17)."""
    db = "bikes_big"
    os.makedirs(f"{out}/database/{db}", exist_ok=True)
    path = f"{out}/database/{db}/{db}.sqlite"
    if os.path.exists(path):
        os.remove(path)
    rng = random.Random(17)
    conn = sqlite3.connect(path)
    conn.executescript(
        """
    CREATE TABLE station (id INTEGER PRIMARY KEY, name TEXT, city TEXT, dock_count INTEGER);
    CREATE TABLE weather (date TEXT PRIMARY KEY, max_temperature_f INTEGER, mean_humidity INTEGER, events TEXT);
    CREATE TABLE trip (id INTEGER PRIMARY KEY, duration INTEGER, start_date TEXT, start_station_id INTEGER,
      end_station_id INTEGER, bike_id INTEGER, subscription_type TEXT, zip_code TEXT);
    """
    )
    cities = ["San Jose", "Redwood City", "Mountain View", "Palo Alto", "San Francisco"]
    conn.executemany(
        "INSERT INTO station VALUES (?, ?, ?, ?)",
        [(i, f"Station {i}", cities[i % len(cities)], 10 + i % 20) for i in range(1, 101)],
    )
    dates = [f"2015-{m:02d}-{d:02d}" for m in range(1, 13) for d in range(1, 29)]
    conn.executemany(
        "INSERT INTO weather VALUES (?, ?, ?, ?)",
        [(d, 50 + rng.randrange(40), 30 + rng.randrange(60), rng.choice(["Rain", "Fog", "Sun"])) for d in dates],
    )
    conn.executemany(
        "INSERT INTO trip VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            (
                i,
                60 + rng.randrange(5000),
                rng.choice(dates),
                1 + rng.randrange(100),
                1 + rng.randrange(100),
                rng.randrange(700),
                rng.choice(["Subscriber", "Customer"]),
                str(94000 + rng.randrange(300)),
            )
            for i in range(1, trips + 1)
        ),
    )
    conn.commit()
    conn.close()
    gold = [
        ("How many trips started at stations in San Jose?",
         "SELECT count(*) FROM trip AS T1 JOIN station AS T2 ON T1.start_station_id = T2.id WHERE T2.city = 'San Jose'"),
        ("What is the average trip duration per city of the start station?",
         "SELECT T2.city, avg(T1.duration) FROM trip AS T1 JOIN station AS T2 ON T1.start_station_id = T2.id GROUP BY T2.city"),
        ("How many trips started on rainy days?",
         "SELECT count(*) FROM trip AS T1 JOIN weather AS T2 ON T1.start_date = T2.date WHERE T2.events = 'Rain'"),
        ("What is the longest trip duration on days warmer than 85 degrees?",
         "SELECT max(T1.duration) FROM trip AS T1 JOIN weather AS T2 ON T1.start_date = T2.date WHERE T2.max_temperature_f > 85"),
        ("How many trips did subscribers make?",
         "SELECT count(*) FROM trip WHERE subscription_type = 'Subscriber'"),
        ("Which bike ids were used for trips longer than 5050 seconds?",
         "SELECT DISTINCT bike_id FROM trip WHERE duration > 5050"),
        ("How many trips started at each station with more than 25 docks?",
         "SELECT T2.name, count(*) FROM trip AS T1 JOIN station AS T2 ON T1.start_station_id = T2.id WHERE T2.dock_count > 25 GROUP BY T2.name"),
        ("What is the average humidity on days with fog?",
         "SELECT avg(mean_humidity) FROM weather WHERE events = 'Fog'"),
    ]
    json.dump([{"db_id": db, "question": q, "query": s} for q, s in gold], open(f"{out}/dev.json", "w"), indent=1)
    json.dump([], open(f"{out}/tables.json", "w"))

# The table shapes: (dimension table, its name column, its category column and values, its
# number column), (fact table, foreign key column, category column and values, two number
# columns), and an optional second dimension (table, name column, number column; the fact table
# refers to it by `<table>_id`).
SHAPES = [
    {
        "dim": ("store", "name", "city", ["Austin", "Boston", "Denver", "Miami", "Seattle", "Tulsa"], "floor_area"),
        "fact": ("sale", "store_id", "channel", ["online", "shop", "phone"], "amount", "quantity"),
        "second": None,
    },
    {
        "dim": ("school", "school_name", "district", ["North", "South", "East", "West"], "founded"),
        "fact": ("student", "school_id", "grade_band", ["junior", "middle", "senior"], "score", "age"),
        "second": ("club", "club_name", "members"),
    },
    {
        "dim": ("airport", "airport_name", "country", ["France", "Japan", "Peru", "Kenya", "Chile"], "runways"),
        "fact": ("flight", "airport_id", "airline", ["Aerol", "Bluejet", "Coastal", "Delta Air"], "distance", "delay"),
        "second": None,
    },
    {
        "dim": ("library", "library_name", "region", ["Alpha", "Beta", "Gamma"], "capacity"),
        "fact": ("book", "library_id", "genre", ["poetry", "history", "science", "novel", "drama"], "pages", "price"),
        "second": ("publisher", "publisher_name", "founded_year"),
    },
]


def lognormal(rng, median, sigma, low, high):
    """A log-normal draw (`median` × e^(σ·N(0,1))), rounded and clipped to [low, high]."""
    return max(low, min(high, round(median * math.exp(sigma * rng.gauss(0, 1)))))


def schema(db, shape):
    """The CREATE TABLE script and Spider's tables.json record of `db` with table shape `shape`."""
    dt, dname, dcat, _, dnum = shape["dim"]
    ft, fk, fcat, _, fnum1, fnum2 = shape["fact"]
    tables = [(dt, [("id", "number"), (dname, "text"), (dcat, "text"), (dnum, "number")])]
    fcols = [("id", "number"), (fk, "number"), (fcat, "text"), (fnum1, "number"), (fnum2, "number")]
    if shape["second"]:
        st, sname, snum = shape["second"]
        tables.append((st, [("id", "number"), (sname, "text"), (snum, "number")]))
        fcols.append((f"{st}_id", "number"))
    tables.append((ft, fcols))
    sql = []
    for t, cols in tables:
        defs = [f"{c} {'INTEGER' if ty == 'number' else 'TEXT'}" + (" PRIMARY KEY" if c == "id" else "") for c, ty in cols]
        refs = [f"FOREIGN KEY ({c}) REFERENCES {c[:-3]}(id)" for c, _ in cols if c.endswith("_id")]
        sql.append(f"CREATE TABLE {t} ({', '.join(defs + refs)});")
    names, types, index = [[-1, "*"]], ["text"], {}
    for ti, (t, cols) in enumerate(tables):
        for c, ty in cols:
            index[(t, c)] = len(names)
            names.append([ti, c])
            types.append(ty)
    record = {
        "db_id": db,
        "table_names_original": [t for t, _ in tables],
        "table_names": [t.replace("_", " ") for t, _ in tables],
        "column_names_original": names,
        "column_names": [[ti, c.replace("_", " ")] for ti, c in names],
        "column_types": types,
        "primary_keys": [index[(t, "id")] for t, _ in tables],
        "foreign_keys": [[index[(ft, c)], index[(c[:-3], "id")]] for c, _ in fcols if c.endswith("_id")],
    }
    return "\n".join(sql), record


def fill(conn, rng, shape, rows):
    """Inserts the dimension rows (5 to 60) and `rows` fact rows."""
    dt, dname, dcat, dvals, dnum = shape["dim"]
    ft, fk, fcat, fvals, fnum1, fnum2 = shape["fact"]
    ndim = 5 + rng.randrange(56)
    conn.executemany(
        f"INSERT INTO {dt} VALUES (?, ?, ?, ?)",
        [(i, f"{dt.title()} {i}", rng.choice(dvals), 10 + rng.randrange(990)) for i in range(1, ndim + 1)],
    )
    nsec = 0
    if shape["second"]:
        st, _, _ = shape["second"]
        nsec = 3 + rng.randrange(20)
        conn.executemany(
            f"INSERT INTO {st} VALUES (?, ?, ?)",
            [(i, f"{st.title()} {i}", 1900 + rng.randrange(120)) for i in range(1, nsec + 1)],
        )
    facts = []
    for i in range(1, rows + 1):
        row = [i, 1 + rng.randrange(ndim), rng.choice(fvals), rng.randrange(10_000), 1 + rng.randrange(100)]
        if nsec:
            row.append(1 + rng.randrange(nsec))
        facts.append(row)
    conn.executemany(f"INSERT INTO {ft} VALUES ({', '.join('?' * len(facts[0]))})", facts)
    return ndim


def question(rng, shape, ndim):
    """One question and its gold SQL, of a kind drawn at random (values from the data's ranges)."""
    dt, dname, dcat, dvals, dnum = shape["dim"]
    ft, fk, fcat, fvals, fnum1, fnum2 = shape["fact"]
    d, f = rng.choice(dvals), rng.choice(fvals)
    k = rng.randrange(100, 9_900)
    n = 1 + rng.randrange(ndim)
    j = f"FROM {ft} AS T1 JOIN {dt} AS T2 ON T1.{fk} = T2.id"
    kinds = [
        (f"How many {ft} records have {fcat} {f}?", f"SELECT count(*) FROM {ft} WHERE {fcat} = '{f}'"),
        (f"What is the average {fnum1} of {ft} records with {fcat} {f}?", f"SELECT avg({fnum1}) FROM {ft} WHERE {fcat} = '{f}'"),
        (f"What are the largest and smallest {fnum1} of {ft} records with {fnum2} above {k % 100}?",
         f"SELECT max({fnum1}), min({fnum1}) FROM {ft} WHERE {fnum2} > {k % 100}"),
        (f"List the {dname} of each {dt} in {d}.", f"SELECT {dname} FROM {dt} WHERE {dcat} = '{d}'"),
        (f"Which {dt} has the largest {dnum}?", f"SELECT {dname} FROM {dt} ORDER BY {dnum} DESC LIMIT 1"),
        (f"Give the {dname} and {dnum} of the 3 {dt} records with the smallest {dnum}.",
         f"SELECT {dname}, {dnum} FROM {dt} ORDER BY {dnum} ASC LIMIT 3"),
        (f"How many {ft} records belong to a {dt} in {d}?", f"SELECT count(*) {j} WHERE T2.{dcat} = '{d}'"),
        (f"What is the total {fnum1} for each {dt}?", f"SELECT T2.{dname}, sum(T1.{fnum1}) {j} GROUP BY T2.{dname}"),
        (f"How many {ft} records are there for each {fcat}?", f"SELECT {fcat}, count(*) FROM {ft} GROUP BY {fcat}"),
        (f"What is the average {fnum2} per {dcat} of the {dt}?", f"SELECT T2.{dcat}, avg(T1.{fnum2}) {j} GROUP BY T2.{dcat}"),
        (f"Which {dt} names have more than {k // 500} {ft} records?",
         f"SELECT T2.{dname} {j} GROUP BY T2.{dname} HAVING count(*) > {k // 500}"),
        (f"What are the distinct {fcat} values of {ft} records with {fnum1} below {k}?",
         f"SELECT DISTINCT {fcat} FROM {ft} WHERE {fnum1} < {k}"),
        (f"How many {ft} records have {fnum1} between {k // 2} and {k}?",
         f"SELECT count(*) FROM {ft} WHERE {fnum1} BETWEEN {k // 2} AND {k}"),
        (f"What is the {fnum1} of the {ft} record of {dt.title()} {n} with the highest {fnum2}?",
         f"SELECT T1.{fnum1} {j} WHERE T2.{dname} = '{dt.title()} {n}' ORDER BY T1.{fnum2} DESC LIMIT 1"),
        (f"List the {dname} of {dt} records whose name contains {n % 10}.",
         f"SELECT {dname} FROM {dt} WHERE {dname} LIKE '%{n % 10}%'"),
    ]
    if shape["second"]:
        st, sname, snum = shape["second"]
        kinds.append((f"How many {ft} records does each {st} have?",
                      f"SELECT T2.{sname}, count(*) FROM {ft} AS T1 JOIN {st} AS T2 ON T1.{st}_id = T2.id GROUP BY T2.{sname}"))
        kinds.append((f"What is the maximum {fnum2} of {ft} records of a {st} founded after {1900 + k % 120}?",
                      f"SELECT max(T1.{fnum2}) FROM {ft} AS T1 JOIN {st} AS T2 ON T1.{st}_id = T2.id WHERE T2.{snum} > {1900 + k % 120}"))
    return rng.choice(kinds)


def corpus(out, databases, seed, median_questions, median_rows):
    """The many-database corpus (module docs) under `out`."""
    rng = random.Random(seed)
    questions, tables = [], []
    for i in range(databases):
        db = f"db{i:03d}"
        shape = SHAPES[rng.randrange(len(SHAPES))]
        rows = lognormal(rng, median_rows, 1.2, 20, 60_000)
        count = lognormal(rng, median_questions, 1.0, 4, 300)
        os.makedirs(f"{out}/database/{db}", exist_ok=True)
        path = f"{out}/database/{db}/{db}.sqlite"
        if os.path.exists(path):
            os.remove(path)
        script, record = schema(db, shape)
        conn = sqlite3.connect(path)
        conn.executescript(script)
        ndim = fill(conn, rng, shape, rows)
        conn.commit()
        conn.close()
        tables.append(record)
        seen = set()
        while len(seen) < count:
            q, sql = question(rng, shape, ndim)
            if q not in seen:
                seen.add(q)
                questions.append({"db_id": db, "question": q, "query": sql})
            elif len(seen) >= 8 and rng.random() < 0.05:
                # The draw repeats itself on a small schema: a database asks some questions twice
                # in other words, as Spider's do (one gold SQL shared by several questions).
                seen.add(q + " (again)")
                questions.append({"db_id": db, "question": q.replace("?", " again?"), "query": sql})
    with open(f"{out}/dev.json", "w") as f:
        json.dump(questions, f, indent=1)
    with open(f"{out}/tables.json", "w") as f:
        json.dump(tables, f, indent=1)
    return len(questions)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="output directory (Spider layout)")
    p.add_argument("trips", nargs="?", type=int, default=1_000_000, help="bikes_big: fact-table rows")
    p.add_argument("--databases", type=int, help="write a corpus of this many databases instead")
    p.add_argument("--seed", type=int, default=34)
    p.add_argument("--questions", type=float, default=25.0, help="median questions per database")
    p.add_argument("--rows", type=float, default=2000.0, help="median fact-table rows per database")
    a = p.parse_args()
    if a.databases:
        n = corpus(a.out, a.databases, a.seed, a.questions, a.rows)
        print(f"{a.out}: {a.databases} databases, {n} questions")
    else:
        bikes_big(a.out, a.trips)


if __name__ == "__main__":
    main()
