"""The end of the pytest file ``forensics repro`` writes (:data:`TAIL`), after the sites'
runners (:mod:`forensics.share.repro_template` holds its docstring, head and rules): each case
run in this process or, for a Triton site, in a child with Triton's interpreter on, then the test
itself.
"""

from __future__ import annotations

TAIL = '''

#: the function running each site's vLLM call on a record
RUNNERS = {name[len("run_"):]: function for name, function in list(globals().items())
           if name.startswith("run_") and callable(function)}
DATA = load_data()
#: what each Triton call this session ran wrote, by its record's data: a V2 embedding's origin
#: that is also a case's record (run before it) is not run again
WRITTEN = {}


#: the exit status of a case's process its deadline ended (as `timeout` exits)
TIMED_OUT = 124


class Crashed(Exception):
    """A Triton case's process was killed by a signal (an access outside the process's
    memory)."""


def _case_id(case):
    return f"{case['site']}-step{case['step']}-rank{case['rank']}"


def run_in_interpreter(index, seconds, part="--case"):
    """Case ``index``'s call (``part`` "--origin": its origin record's) in a fresh process
    running this file with Triton's interpreter on and no GPU visible: what it wrote; raises
    IndexError as the call did, Deadline past ``seconds``, Crashed when a signal killed it."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
    try:
        run = subprocess.run([sys.executable, str(Path(__file__).resolve()), part,
                              str(index)], env=env, capture_output=True, text=True,
                             timeout=seconds)
    except subprocess.TimeoutExpired:
        raise Deadline() from None
    if run.returncode < 0:  # a signal this Python has no name for is named by its number
        name = {s.value: s.name for s in signal.Signals}.get(-run.returncode)
        raise Crashed(f"its process was killed by {name or f'signal {-run.returncode}'}")
    lines = [line for line in run.stdout.splitlines() if line.startswith(OUTCOME)]
    outcome = json.loads(lines[-1][len(OUTCOME):]) if lines else {}
    if run.returncode == TIMED_OUT and "timed_out" in outcome:
        raise Deadline()
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"the case's process exited {run.returncode}: "
                           f"{run.stderr.strip()[-2000:]}")
    if "index_error" in outcome:
        raise IndexError(outcome["index_error"])
    if "bad_data" in outcome:
        raise BadData(outcome["bad_data"])
    return [(tensor, values, tuple(allowed)) for tensor, values, allowed in outcome["written"]]


def _cell(cell, where, shape=None):
    """A cell of :func:`written_cells` (``"[3]"``, ``"[1, 2]"``) as a tuple of ints; with
    ``shape``, one index per dimension or one flat index, inside it. BadData naming ``where``
    when it is not (the data file's record does not match the buffer the call wrote)."""
    text = cell if isinstance(cell, str) else ""
    parts = [part.strip() for part in text[1:-1].split(",")] if text[:1] + text[-1:] == "[]" \
        else [""]
    if not all(part.isascii() and part.isdigit() for part in parts):
        _fail(where, f"{ascii(cell)} is not a cell the call could write")
    at = tuple(int(part) for part in parts)
    if shape is None:
        return at
    size = 1
    for n in shape:
        size *= n
    if (len(at) == len(shape) and all(i < n for i, n in zip(at, shape))) \
            or (len(at) == 1 and at[0] < size):
        return at
    _fail(where, f"the call wrote the cell {text}, outside the record's {list(shape)} values")


def _where(record_case):
    return (f"the capture's step-{record_case['step']} {record_case['site']} record (rank "
            f"{record_case['rank']})")


def inputs_from(record_case):
    """Where a call's inputs come from: the record, and for one with a ``chain``, the slots
    of its chained field holding what the chain's call stores, run first."""
    where, chain = _where(record_case), record_case.get("chain")
    if chain is not None:
        where += (f", its {chain['field']} at slots {chain['slots']} being what "
                  f"{function_of(chain)} stores there on {_where(chain)}, run first")
    return where


def inputs(case):
    """The case's record, decoded; for a record with a ``chain``, its chained field holds, at
    the chain's slots, what the chain's vLLM call (run first, on its own recorded inputs) stores
    there: the value it writes, else the one it leaves (the chain record's)."""
    r = record(case)
    chain = case.get("chain")
    if chain is None:
        return r
    field, before = chain["field"], record(chain)
    stored = before[field].clone()
    try:
        written = RUNNERS[chain["site"]](before)
    except IndexError as exc:
        raise IndexError(f"in {function_of(chain)}, run first on {_where(chain)} to derive "
                         f"{field}: {exc}") from None
    for cell, value in next((v for t, v, _ in written if t == field), {}).items():
        at = _cell(cell, f"{_where(chain)}: {field}", tuple(stored.shape))
        if len(at) == stored.dim():
            stored[at] = value
        else:
            stored.view(-1)[at[0]] = value
    stored = stored.reshape(-1)
    carried = r[field].clone()
    flat = carried.view(-1)
    for slot in chain["slots"]:
        if slot >= min(flat.numel(), stored.numel()):
            _fail("origin.chain.slots", f"slot {slot} is outside {field}")
        flat[slot] = stored[slot]
    r[field] = carried
    return r


def case_process(index, part="--case"):
    """The body of ``python THIS_FILE.py --case N`` (``--origin N``): run case N (its origin
    record) under the data file's deadline, print its outcome; past the deadline, one line on
    stderr saying so and exit :data:`TIMED_OUT`."""
    case = DATA["cases"][index]
    if part == "--origin":
        case = case["origin"]
    seconds = DATA["deadline_s"]
    try:
        with deadline(seconds):
            written = RUNNERS[case["site"]](inputs(case))
    except Deadline:
        print(OUTCOME + json.dumps({"timed_out": seconds}), flush=True)
        print(f"timed out after {seconds} s in {function_of(case)} on {_where(case)} "
              f"({part} {index}); the data file's deadline_s is set by forensics repro "
              "--deadline", file=sys.stderr, flush=True)
        sys.exit(TIMED_OUT)
    except IndexError as exc:
        outcome = {"index_error": str(exc)}
    except BadData as exc:
        outcome = {"bad_data": str(exc)}
    else:
        outcome = {"written": [[tensor, values, list(allowed)]
                               for tensor, values, allowed in written]}
    print(OUTCOME + json.dumps(outcome), flush=True)


def _key(case):
    """A record's identity: its site, its fields' data and its chain's."""
    return json.dumps([case["site"], case["record"], case.get("chain")], sort_keys=True)


def run_record(case, index, part, seconds):
    """What vLLM's call wrote on case ``index``'s record (``part`` "--origin": its origin's,
    reusing a case's run of the same record), a Triton call in its own process, any other
    here under the deadline."""
    if case["site"] not in TRITON_SITES:
        with deadline(seconds):
            return RUNNERS[case["site"]](inputs(case))
    if part == "--origin" and _key(case) in WRITTEN:
        return WRITTEN[_key(case)]
    written = run_in_interpreter(index, seconds, part)
    WRITTEN[_key(case)] = written
    return written


def carried_ids(case, index, r, seconds):
    """A V2 embedding's ``input_ids`` as the installed vLLM writes them: the recorded ids with
    every cell its origin's call writes, run on the origin's recorded inputs, replaced by what
    the call wrote; and the words saying where they come from (the recorded ids, saying why,
    when the capture holds no origin record or the origin's call writes no ``input_ids``)."""
    origin = case["origin"]
    cannot = "so this test checks the recorded ids and cannot carry a fix to vLLM forward"
    if origin is None:
        return r["input_ids"], ("the recorded input_ids (the capture's replay finds no record "
                                f"of the call that wrote them, {cannot})")
    where = inputs_from(origin)
    try:
        written = run_record(origin, index, "--origin", seconds)
    except (IndexError, Crashed) as exc:
        raise IndexError(f"in {function_of(origin)}, run on {where} to derive the embedding's "
                         f"input_ids: {exc}") from None
    cells = next((values for tensor, values, _ in written if tensor == "input_ids"), None)
    if cells is None:
        return r["input_ids"], (f"the recorded input_ids ({function_of(origin)} on {where} "
                                f"writes no input_ids, {cannot})")
    ids = r["input_ids"].clone().reshape(-1)
    for cell, value in cells.items():
        at = _cell(cell, f"{_where(origin)}: input_ids")
        if len(at) != 1:
            _fail(f"{_where(origin)}: input_ids", f"the call wrote the cell {cell} of a 1-D "
                                                 "buffer")
        element = at[0]
        if element < ids.numel():
            ids[element] = value
    return ids.reshape(r["input_ids"].shape), (
        f"the input_ids {function_of(origin)} writes on {where}, run on the installed vLLM")


def check_carried(case, r, ids, source):
    """Fail naming the element, value and bound of the first id outside the vocabulary (the
    capture's, else the embedding's rows)."""
    bound, what = case["facts"]["vocab_size"], "the vocabulary"
    if bound is None:
        bound, what = r["num_embeddings"], "the embedding's rows"
    bad = ids_outside(ids.reshape(-1).tolist(), bound, ())
    assert not bad, (f"{source}: input_ids{bad[0][0]} = {bad[0][1]} is outside {what} "
                     f"[0, {bound}) ({len(bad)} such ids; first ones: {bad[:5]})")


def as_recorded(case):
    """For a sink's case run on its ids as recorded (one that carries no origin, as a V1
    capture's): that a fix to the call that wrote them does not pass it."""
    if case["site"] != SINK or "origin" in case:
        return ""
    return ("; the embedding ran on the input_ids as recorded: a fix to the call that wrote "
            "them does not pass this test (that call's own test, where this file holds one, "
            "does)")


@pytest.mark.parametrize("case", DATA["cases"], ids=_case_id)
def test_index_stays_in_range(case):
    """vLLM's call on the record leaves no index out of range and writes no id outside the
    vocabulary; a V2 embedding's ids are those its origin's vLLM call writes, checked."""
    need_vllm(DATA["vllm"]["needed"])
    r = record(case)
    function, seconds = function_of(case), DATA["deadline_s"]
    index = next(i for i, c in enumerate(DATA["cases"]) if c is case)
    try:
        if "origin" in case:
            ids, source = carried_ids(case, index, r, seconds)
            check_carried(case, r, ids, source)
            written = []
        else:
            written = run_record(case, index, "--case", seconds)
    except Deadline:
        pytest.fail(f"timed out after {seconds} s in {function}", pytrace=False)
    except (IndexError, Crashed) as exc:
        pytest.fail(f"out-of-range access in {function}: {exc}; {held(case, r)}"
                    f"{as_recorded(case)}", pytrace=False)
    unobserved = read_unobserved(case, r) if case["site"] in TRITON_SITES else ""
    assert not unobserved, unobserved
    vocab = case["facts"]["vocab_size"]
    if vocab is None:
        warnings.warn("the ids vLLM wrote are not checked: the capture holds no vocabulary "
                      "size")
        return
    ran = f"; it ran on {inputs_from(case)}" if "chain" in case else ""
    for tensor, values, allowed in written:
        bad = ids_outside(values, vocab, allowed)
        assert not bad, (f"{function} wrote {tensor}{bad[0][0]} = {bad[0][1]}, outside the "
                         f"vocabulary [0, {vocab}) ({len(bad)} such ids; first ones: "
                         f"{bad[:5]}){ran}")


if __name__ == "__main__" and sys.argv[1:2] in (["--case"], ["--origin"]):
    case_process(int(sys.argv[2]), sys.argv[1])
'''
