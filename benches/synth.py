"""A synthetic large database in Spider's layout (issue 17), so the join step's memory bound is
measured where BIRD-scale data stresses it. Usage: synth.py OUT_DIR [TRIPS]

Writes OUT_DIR/dev.json (questions with gold SQL), OUT_DIR/tables.json and
OUT_DIR/database/bikes_big/bikes_big.sqlite: a bike_1-like schema with a `trip` fact table of
TRIPS rows (default 1,000,000) and its `station` and `weather` dimensions; the questions join the
fact table with each dimension, filter, group and aggregate. Deterministic (seeded)."""
import json
import os
import random
import sqlite3
import sys

out = sys.argv[1]
trips = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000_000
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
