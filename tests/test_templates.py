"""AgentV templates render fully or are refused by ``validate``: filters, ``{% if %}`` and
``{% for %}`` reach the target rendered, and a template evalrun cannot honour is a file:line
error, never text sent as written (docs/eval-files.md, "Templates")."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evalrun.spec.loader import EvalFileError, load_eval
from evalrun.spec.templates import TemplateProblem, render
from tests.conftest import read_bundle, run_cli

#: A mock target that says which prompt it was sent: only the fully rendered one matches.
TARGETS = """\
targets:
  - name: echo
    kind: mock
    default: some other prompt
    rules:
      - match: '\\ASay HELLO please: tea, cake\\Z'
        response: got the polite one
      - match: '\\ASay HELLO: tea, cake\\Z'
        response: got the plain one
"""


def write(tmp_path: Path, body: str, name: str = "suite.eval.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_filters_if_and_for_reach_the_target_rendered(tmp_path: Path) -> None:
    (tmp_path / "targets.yaml").write_text(TARGETS)
    path = write(
        tmp_path,
        """
        providers: [echo]
        prompts:
          - "Say {{ word | upper }}{% if polite %} please{% endif %}: {% for x in order.items %}{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}"
        default_test:
          vars: {word: hello, order: {items: [tea, cake]}}
        tests:
          - id: polite
            vars: {polite: true}
            assert: [{type: equals, value: got the polite one}]
          - id: plain
            vars: {polite: false}
            assert: [{type: equals, value: got the plain one}]
        """,
    )
    assert run_cli("validate", str(path), cwd=tmp_path).returncode == 0
    out = tmp_path / "out"
    result = run_cli(str(path), "--out", str(out), "-q", "--no-cache", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    rows, _ = read_bundle(out)
    assert {row["id"]: row["status"] for row in rows} == {"polite": "passed", "plain": "passed"}


def test_nunjucks_filters_render_as_nunjucks_does(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        providers: sut
        prompts:
          - "{{ person | dump }} | {{ person | dump(1) }} | {{ tags | join('+') }} | {{ nick | default('none') }} | {{ pad | trim | lower }} | {{ 7 * 7 }}"
        tests:
          - id: t
            vars: {person: {name: Ada, born: 1815}, tags: [a, b], pad: "  MiXed  "}
            assert: [{type: contains, value: Ada}]
        """,
    )
    dumped = '{"name":"Ada","born":1815}'
    indented = json.dumps({"name": "Ada", "born": 1815}, indent=1)
    assert load_eval(path).tests[0].input == f"{dumped} | {indented} | a+b | none | mixed | 49"


def test_assertion_values_render_before_they_become_regexes(tmp_path: Path) -> None:
    """A value is text to look for: ``starts-with`` and the ``-any``/``-all`` lists are rendered
    with the test's vars, once, before their checks read them; a ``regex`` value is no template."""
    path = write(
        tmp_path,
        """
        providers: sut
        prompts: ["{{ input }}"]
        tests:
          - id: t
            vars: {input: hi, name: Ada, greet: "{{ name | upper }}"}
            assert:
              - {type: starts-with, value: "Hello {{ name }}"}
              - {type: contains-all, value: ["{{ greet }}", "{{ name | lower }}"]}
              - {type: icontains-any, value: ["{{ name }}!", bye]}
              - {type: regex, value: "{{2}"}
              - {type: llm-rubric, value: "Greets {{ greet }}"}
        """,
    )
    graders = load_eval(path).tests[0].graders
    assert [(g.type, g.value) for g in graders[:4]] == [
        ("starts-with", "Hello Ada"),
        ("contains-all", ["ADA", "ada"]),
        ("icontains-any", ["Ada!", "bye"]),
        ("regex", "{{2}"),
    ]
    assert graders[4].config["rubric"] == ["Greets ADA"]


def test_only_agentv_templates_render_and_raw_keeps_braces(tmp_path: Path) -> None:
    """AgentV renders its prompts with Nunjucks, so ``{{ 7 * 7 }}`` there is 49 and ``{% raw %}``
    keeps it; evalrun's own ``input`` is never a template."""
    current = write(
        tmp_path,
        """
        providers: sut
        prompts: ["{% raw %}What does {{ 7 * 7 }} print?{% endraw %}"]
        tests:
          - {id: t, vars: {}, assert: [{type: contains, value: "49"}]}
        """,
    )
    own = write(
        tmp_path,
        """
        target: mock
        graders: [{type: contains, value: "49"}]
        tests:
          - {id: t, input: "What does {{ 7 * 7 }} print? {% if %}"}
        """,
        name="own.eval.yaml",
    )
    assert load_eval(current).tests[0].input == "What does {{ 7 * 7 }} print?"
    assert load_eval(own).tests[0].input == "What does {{ 7 * 7 }} print? {% if %}"


@pytest.mark.slow  # moved out of the default run to keep it under 3 minutes
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            """
            providers: sut
            prompts: ["Say {{ word | shout }}"]
            tests:
              - {id: t, vars: {word: hi}, assert: [{type: contains, value: hi}]}
            """,
            ":3: prompts[0]: unknown filter 'shout'",
        ),
        (
            """
            providers: sut
            prompts: ["Say {{ word | uper }}"]
            tests:
              - {id: t, vars: {word: hi}, assert: [{type: contains, value: hi}]}
            """,
            ":3: prompts[0]: unknown filter 'uper'; did you mean 'upper'?",
        ),
        (
            """
            providers: sut
            prompts:
              - |
                Say {{ word }}
                {% if word %}twice{% endfi %}
            tests:
              - {id: t, vars: {word: hi}, assert: [{type: contains, value: hi}]}
            """,
            ":4: prompts[0]: template error: Encountered unknown tag 'endfi'",
        ),
        (
            """
            providers: sut
            prompts: ["{% include 'other.txt' %}"]
            tests:
              - {id: t, vars: {}, assert: [{type: contains, value: hi}]}
            """,
            ":3: prompts[0]: '{% include %}' is not supported in templates",
        ),
        (
            """
            providers: sut
            prompts: ["Hello {{ name }}"]
            tests:
              - {id: has, vars: {name: Ada}, assert: [{type: contains, value: Ada}]}
              - {id: lacks, vars: {nick: Al}, assert: [{type: contains, value: Al}]}
            """,
            ":3: prompts[0]: '{{ name }}' names no var (vars: nick) (test 'lacks')",
        ),
        (  # two prompts make four cases of two tests: the line is the second test's own
            """
            providers: sut
            prompts: ["{{ input }}", "Answer: {{ input }}"]
            tests:
              - {id: fine, vars: {input: hi}, assert: [{type: contains, value: hi}]}
              - id: t
                vars:
                  input: "Hi {{ person.nmae }}"
                  person: {name: Ada}
                assert: [{type: contains, value: Ada}]
            """,
            ':8: tests[1].vars.input: {"name": "Ada"} has no key \'nmae\'',
        ),
        (
            """
            providers: sut
            prompts: ["{{ input }}"]
            tests:
              - id: t
                vars: {input: hi, word: x}
                assert: [{type: contains, value: "{{ word | upper }"}]
            """,
            ":7: tests[0].assert[0].value: template error: unexpected '}'",
        ),
    ],
    ids=[
        "unknown-filter",
        "misspelt-filter",
        "syntax-error",
        "unsupported-tag",
        "var-one-test-lacks",
        "missing-key",
        "assertion-syntax-error",
    ],
)
def test_validate_refuses_a_template_it_cannot_render(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = write(tmp_path, body)
    with pytest.raises(EvalFileError) as caught:
        load_eval(path)
    assert f"{path}{expected}" in str(caught.value)
    result = run_cli("validate", str(path))
    assert result.returncode == 2
    assert f"{path}{expected}" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "template",
    [
        '{{ "ab" * 3000000 }}',
        "{{ [0] * 5000000 }}",
        "{{ 2 ** 14000000 }}",
        "{% for i in range(100000) %}{% for j in range(5) %}xxxxxxxxxx{% endfor %}{% endfor %}",
    ],
    ids=["repeated-text", "repeated-list", "power", "nested-loops"],
)
def test_a_template_cannot_build_text_over_the_limit(template: str) -> None:
    """The limit is the eval file's own (docs/eval-files.md, "Limits"): a template is refused
    before it builds more, so ``validate`` cannot be made to exhaust memory."""
    with pytest.raises(TemplateProblem, match="over the 4194304-character limit"):
        render(template, {})
