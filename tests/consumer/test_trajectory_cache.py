"""Issue 45, item 6: `load_dataset("<dir>/trajectories")` — the route the cards give — returns each
recipe's own rows, also after a rebuild changed the files.

`datasets` (4.x, 5.x) caches a local folder by the folder's name and the config name, never by the
files' contents: with every recipe's card naming its config `default` in a folder named
`trajectories`, loading sel-spider's folder and then slot-spider's gave sel-spider's rows, and a
rebuilt folder the old ones. Each test here uses a fresh `datasets` cache (`HF_HOME` and
`cache_dir` under its own tmp_path) and builds into its own output root with the real
`target/release/toolforge`: two recipes loaded one after the other must each give their own ids,
in file order; a recipe rebuilt with other trajectory files (a `max_tokens` cap dropping some)
must give the new files' rows.
"""
import json
import os
import shutil
import subprocess
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release", "toolforge")


def project(tmp_path, recipes):
    """A project root in `tmp_path`: `sources/` linked to the real one, the given recipes copied
    (name -> extra TOML appended), each source's corpus named by its environment variable."""
    root = tmp_path / "project"
    (root / "recipes").mkdir(parents=True)
    os.symlink(os.path.join(ROOT, "sources"), root / "sources")
    env = dict(os.environ)
    for name, extra in recipes.items():
        text = open(os.path.join(ROOT, "recipes", name + ".toml")).read() + extra
        (root / "recipes" / (name + ".toml")).write_text(text)
        source = tomllib.loads(text)["source"]
        manifest = tomllib.load(open(os.path.join(ROOT, "sources", source + ".toml"), "rb"))
        for p in manifest.get("search_paths", []):
            if os.path.exists(os.path.join(ROOT, p)):
                env[manifest["env"]] = os.path.abspath(os.path.join(ROOT, p))
                break
    return root, env


def build(root, env, name, tmp_path):
    subprocess.run([BIN, "build", str(root / "recipes" / (name + ".toml")), "--quiet", "--no-html",
                    "--out", str(tmp_path / "out"), "--store", str(tmp_path / "store")],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    return tmp_path / "out" / name / "trajectories"


def ids(path):
    with open(path) as f:
        return [json.loads(line)["id"] for line in f]


def load(folder, cache, split):
    import datasets

    datasets.disable_progress_bars()
    return datasets.load_dataset(str(folder), split=split, cache_dir=str(cache))["id"]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    return tmp_path / "hf" / "datasets"


def test_two_recipes_loaded_one_after_the_other_give_their_own_rows(tmp_path, fresh_cache):
    root, env = project(tmp_path, {"seq-multiwoz": "", "seq-sgd": ""})
    a = build(root, env, "seq-multiwoz", tmp_path)
    b = build(root, env, "seq-sgd", tmp_path)
    for folder in (a, b, a):
        got = load(folder, fresh_cache, "test")
        want = ids(folder / "test.jsonl")
        print(f"{folder.parent.name}: loaded {len(got)} rows, file {len(want)}; first {got[:1]}")
        assert got == want, folder


def test_a_rebuilt_folder_loads_its_new_rows(tmp_path, fresh_cache):
    root, env = project(tmp_path, {"seq-multiwoz": ""})
    folder = build(root, env, "seq-multiwoz", tmp_path)
    before = ids(folder / "test.jsonl")
    assert load(folder, fresh_cache, "test") == before
    # Rebuild the same recipe into the same folder with a cap that drops the longest rows.
    tokens = sorted(len(line) for line in open(folder / "openai" / "test.jsonl"))
    cap = tokens[len(tokens) // 2] // 4
    recipe = root / "recipes" / "seq-multiwoz.toml"
    recipe.write_text(recipe.read_text() + f"\n[trajectories]\nmax_tokens = {cap}\n")
    build(root, env, "seq-multiwoz", tmp_path)
    after = ids(folder / "test.jsonl")
    assert 0 < len(after) < len(before)
    got = load(folder, fresh_cache, "test")
    print(f"rebuilt: loaded {len(got)} rows, file {len(after)} (was {len(before)})")
    assert got == after
