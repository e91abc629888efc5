"""Random state providers with a sequential unit (changes that read each other's writes), for the
differential test of tests/test_engine/test_sequential_fuzz.py: paths of fields, constants, event
names, null elements and locations; conditions (and, or, not, fields, two values, every operator);
values of every kind (forced types, mapping groups, queries of the unit's own attributes and of
other units'); increments; handlers whose event-name patterns overlap; and random events with
missing fields and equal timestamps. Written for dfcompass by a review of the sequential runner."""

from __future__ import annotations

import random
from typing import Any

OPS = ["eq", "ne", "lt", "le", "gt", "ge"]
FIELDS = ["a", "b", "c", "d", "m"]  # m: usually missing
SEQ_ROOTS = ["S", "L"]
OTHER_ROOTS = ["Str", "Cnt"]


def field_value(rng: random.Random, name: str) -> Any:
    if name == "a":
        return rng.choice([0, 1, 2, None, 1])
    if name == "b":
        return rng.choice(["x", "y", "1", "", None, "2"])
    if name == "c":
        return rng.choice([-1, 0, 3, 2**40, 1.5, 2.0, 0.0, "3", 2**62, -7])
    if name == "d":
        return rng.choice([0.5, 1.0, 2, None])
    return rng.choice([1, "z", None])


def gen_segment(rng: random.Random, allow_null: bool = True, allow_loc: bool = True) -> str:
    r = rng.random()
    if r < 0.45:
        return f'<stateAttribute type="eventField" value="{rng.choice(FIELDS)}"/>'
    if r < 0.65:
        return f'<stateAttribute type="constant" value="{rng.choice(["k", "0", "1", "$DEF", "x"])}"/>'
    if r < 0.75:
        return '<stateAttribute type="eventName"/>'
    if r < 0.85 and allow_null:
        return '<stateAttribute type="null"/>'
    if r < 0.95 and allow_loc:
        return '<stateAttribute type="location" value="loc"/>'
    return f'<stateAttribute type="eventField" value="{rng.choice(FIELDS)}"/>'


def gen_path(rng: random.Random, root: str | None, allow_loc: bool = True) -> str:
    out = f'<stateAttribute type="constant" value="{root}"/>' if root else ""
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        out += gen_segment(rng, allow_loc=allow_loc)
    if not out:
        out = '<stateAttribute type="constant" value="S"/>'
    return out


def gen_const(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.25:
        return f'<stateValue type="int" value="{rng.choice([0, 1, 2, -1, "$N"])}"/>'
    if r < 0.5:
        return f'<stateValue type="long" value="{rng.choice([0, 1, 2, 3, 2**40])}"/>'
    if r < 0.7:
        return f'<stateValue type="string" value="{rng.choice(["x", "1", "", "y", "$DEF", "null"])}"/>'
    return '<stateValue type="null"/>'


def gen_value(rng: random.Random, own_query_ok: bool = True, for_increment: bool = False) -> str:
    r = rng.random()
    inc = ' increment="true"' if for_increment else ""
    forced = ""
    if rng.random() < 0.15:
        forced = f' forcedType="{rng.choice(["int", "long", "string", "double"])}"'
    if r < 0.35:
        c = gen_const(rng)
        return c.replace("/>", f"{inc}{forced}/>")
    if r < 0.6:
        mg = ' mappingGroup="mg"' if rng.random() < 0.15 else ""
        return f'<stateValue type="eventField" value="{rng.choice(FIELDS)}"{mg}{inc}{forced}/>'
    if r < 0.7:
        return f'<stateValue type="eventName"{inc}{forced}/>'
    if r < 0.75:
        return f'<stateValue type="delete"{inc}/>'
    roots = OTHER_ROOTS + (SEQ_ROOTS if own_query_ok and rng.random() < 0.3 else [])
    return f'<stateValue type="query"{inc}{forced}>{gen_path(rng, rng.choice(roots))}</stateValue>'


def gen_condition(rng: random.Random, depth: int = 0) -> str:
    r = rng.random()
    if depth < 2 and r < 0.25:
        tag = rng.choice(["and", "or"])
        parts = "".join(gen_condition(rng, depth + 1) for _ in range(rng.randint(1, 3)))
        return f"<{tag}>{parts}</{tag}>"
    if depth < 2 and r < 0.35:
        return f"<not>{gen_condition(rng, depth + 1)}</not>"
    op = f' operator="{rng.choice(OPS)}"' if rng.random() < 0.6 else ""
    r = rng.random()
    if r < 0.55:
        root = rng.choice(SEQ_ROOTS + SEQ_ROOTS + OTHER_ROOTS + ["Probe"])
        return f"<condition{op}>{gen_path(rng, root)}{gen_value(rng)}</condition>"
    if r < 0.8:
        return f'<condition{op}><field name="{rng.choice(FIELDS)}"/>{gen_value(rng, own_query_ok=False)}</condition>'
    return f"<condition{op}>{gen_value(rng, own_query_ok=False)}{gen_value(rng, own_query_ok=False)}</condition>"


def typed_value(rng: random.Random, root: str, inc: bool) -> str:
    i = ' increment="true"' if inc else ""
    if root == "S":  # longs
        return rng.choice([f'<stateValue type="long" value="{rng.choice([0, 1, 2, -1])}"{i}/>',
                           f'<stateValue type="eventField" value="a"{i}/>',
                           '<stateValue type="null"/>',
                           f'<stateValue type="query"{i}><stateAttribute type="constant" value="Cnt"/>'
                           f'<stateAttribute type="eventField" value="{rng.choice(FIELDS)}"/></stateValue>'])
    if root == "L":  # strings
        return rng.choice([f'<stateValue type="string" value="{rng.choice(["x", "1", "", "$DEF"])}"/>',
                           '<stateValue type="eventField" value="b"/>',
                           '<stateValue type="eventName"/>',
                           '<stateValue type="eventField" value="a" mappingGroup="mg2"/>',
                           '<stateValue type="eventField" value="a" forcedType="string"/>',
                           '<stateValue type="null"/>',
                           '<stateValue type="query"><stateAttribute type="constant" value="Str"/>'
                           f'<stateAttribute type="eventField" value="{rng.choice(FIELDS)}"/></stateValue>'])
    return rng.choice([f'<stateValue type="long" value="1"{i}/>', f'<stateValue type="eventField" value="a"{i}/>',
                       f'<stateValue type="eventField" value="c"{i}/>'])


def gen_leaf(rng: random.Random, typed: bool) -> str:
    root = rng.choice(SEQ_ROOTS + SEQ_ROOTS + ["Cnt", "D"])
    inc = rng.random() < 0.25
    if root == "D":
        i = ' increment="true"' if inc or rng.random() < 0.5 else ""
        return gen_path(rng, root) + rng.choice([f'<stateValue type="eventField" value="d"{i}/>',
                                                 f'<stateValue type="eventField" value="d" forcedType="double"{i}/>',
                                                 f'<stateValue type="int" value="1"{i}/>',
                                                 f'<stateValue type="eventField" value="a" forcedType="int"{i}/>'])
    if typed:  # each root keeps one type: the run goes past the type lock
        return gen_path(rng, root) + typed_value(rng, root, inc and root != "L")
    return gen_path(rng, root) + gen_value(rng, for_increment=inc)


def gen_change(rng: random.Random, typed: bool, depth: int = 0) -> str:
    if depth < 2 and rng.random() < 0.6:
        other = f"<else>{gen_change(rng, typed, depth + 1)}</else>" if rng.random() < 0.6 else ""
        return f"<if>{gen_condition(rng)}</if><then>{gen_change(rng, typed, depth + 1)}</then>{other}"
    return gen_leaf(rng, typed)


def gen_provider(rng: random.Random, typed: bool) -> str:
    handlers = []
    # the self-cycle that makes a sequential unit
    first = typed_value(rng, "S", False) if typed else gen_value(rng)
    handlers.append(("begin", [
        f'<if><condition><stateAttribute type="constant" value="S"/><stateAttribute type="eventField" value="a"/>'
        f'<stateValue type="null"/></condition></if><then><stateAttribute type="constant" value="S"/>'
        f'<stateAttribute type="eventField" value="a"/>{first}</then>'
        f'<else>{gen_change(rng, typed, 1)}</else>']))
    names = ["begin", "end", "(begin|end)", "b.*", "tick", "str", "e.*|tick"]
    for _ in range(rng.randint(1, 4)):
        handlers.append((rng.choice(names), [gen_change(rng, typed) for _ in range(rng.randint(1, 3))]))
    # other units
    handlers.append(("str", ['<stateAttribute type="constant" value="Str"/><stateAttribute type="eventField" '
                             'value="a"/><stateValue type="eventField" value="b"/>']))
    if rng.random() < 0.5:
        v = (typed_value(rng, "Cnt", rng.random() < 0.7) if typed
             else gen_value(rng, own_query_ok=False, for_increment=rng.random() < 0.7))
        handlers.append(("tick", ['<stateAttribute type="constant" value="Cnt"/><stateAttribute type="eventField" '
                                  f'value="a"/>{v}']))
    rng.shuffle(handlers)
    body = "".join(
        f'<eventHandler eventName="{n}">' + "".join(f"<stateChange>{c}</stateChange>" for c in cs) + "</eventHandler>"
        for n, cs in handlers)
    return f"""<tmfxml><stateProvider id="t.fuzz" version="1">
<definedValue name="DEF" value="{rng.choice(['d', '1', 'x'])}"/><definedValue name="N" value="{rng.choice(['1', '2'])}"/>
<location id="loc">{gen_path(rng, rng.choice(['S', 'L', None]), allow_loc=False)}</location>
<mappingGroup id="mg"><entry><stateValue type="long" value="1"/><stateValue type="string" value="one"/></entry>
<entry><stateValue type="string" value="x"/><stateValue type="int" value="7"/></entry>
<entry><stateValue type="null"/><stateValue type="string" value="nil"/></entry></mappingGroup>
<mappingGroup id="mg2"><entry><stateValue type="long" value="1"/><stateValue type="string" value="one"/></entry>
<entry><stateValue type="null"/><stateValue type="string" value="nil"/></entry></mappingGroup>
{body}
</stateProvider></tmfxml>"""


def gen_events(rng: random.Random) -> list[tuple[str, int, dict[str, Any]]]:
    events: list[tuple[str, int, dict[str, Any]]] = []
    t = rng.randint(0, 3)
    for _ in range(rng.randint(3, 40)):
        t += rng.choice([0, 0, 1, 2, 5])
        name = rng.choice(["begin", "begin", "end", "bx", "tick", "str", "ex"])
        fields: dict[str, Any] = {}
        for f in FIELDS:
            if f == "m" and rng.random() < 0.8:
                continue
            if rng.random() < 0.1:
                continue  # a missing field
            fields[f] = field_value(rng, f)
        events.append((name, t, fields))
    return events
