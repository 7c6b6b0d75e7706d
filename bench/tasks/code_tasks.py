"""Code tasks with unit tests for the sandbox benchmark: a small function each, its planted solution, and asserts.

Each task is (name, solution, tests). `rows()` gives them in the shape the python_tests verifier reads
({"prompt", "tests"}) with the solution as the completion; every planted solution passes all its tests
(bench/sandbox_throughput.py checks that before it times anything).
"""

import ast
import json

TASKS: list[tuple[str, str, list[str]]] = [
    ("add", "def add(a, b):\n    return a + b", ["assert add(2, 3) == 5", "assert add(-1, 1) == 0"]),
    ("sub", "def sub(a, b):\n    return a - b", ["assert sub(5, 3) == 2", "assert sub(0, 4) == -4"]),
    ("mul", "def mul(a, b):\n    return a * b", ["assert mul(4, 5) == 20", "assert mul(-2, 3) == -6"]),
    ("square", "def square(x):\n    return x * x", ["assert square(7) == 49", "assert square(-3) == 9"]),
    ("cube", "def cube(x):\n    return x ** 3", ["assert cube(3) == 27", "assert cube(-2) == -8"]),
    ("is_even", "def is_even(n):\n    return n % 2 == 0", ["assert is_even(4)", "assert not is_even(7)"]),
    ("is_odd", "def is_odd(n):\n    return n % 2 == 1", ["assert is_odd(3)", "assert not is_odd(10)"]),
    (
        "absolute",
        "def absolute(x):\n    return -x if x < 0 else x",
        ["assert absolute(-5) == 5", "assert absolute(2) == 2"],
    ),
    (
        "maximum",
        "def maximum(xs):\n    best = xs[0]\n    for x in xs:\n        best = x if x > best else best\n    return best",
        ["assert maximum([3, 9, 2]) == 9", "assert maximum([-4]) == -4"],
    ),
    (
        "minimum",
        "def minimum(xs):\n    return sorted(xs)[0]",
        ["assert minimum([3, 9, 2]) == 2", "assert minimum([5, 5]) == 5"],
    ),
    (
        "total",
        "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s",
        ["assert total([1, 2, 3]) == 6", "assert total([]) == 0"],
    ),
    (
        "mean",
        "def mean(xs):\n    return sum(xs) / len(xs)",
        ["assert mean([1, 2, 3]) == 2", "assert mean([4]) == 4"],
    ),
    (
        "median",
        "def median(xs):\n    s = sorted(xs)\n    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2",
        ["assert median([3, 1, 2]) == 2", "assert median([1, 2, 3, 4]) == 2.5"],
    ),
    (
        "factorial",
        "def factorial(n):\n    return 1 if n < 2 else n * factorial(n - 1)",
        ["assert factorial(5) == 120", "assert factorial(0) == 1"],
    ),
    (
        "fib",
        "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        ["assert fib(10) == 55", "assert fib(1) == 1"],
    ),
    (
        "gcd",
        "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a",
        ["assert gcd(12, 18) == 6", "assert gcd(7, 5) == 1"],
    ),
    (
        "lcm",
        "def lcm(a, b):\n    import math\n    return a * b // math.gcd(a, b)",
        ["assert lcm(4, 6) == 12", "assert lcm(3, 5) == 15"],
    ),
    (
        "is_prime",
        "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))",
        ["assert is_prime(13)", "assert not is_prime(15)", "assert not is_prime(1)"],
    ),
    (
        "primes_below",
        "def primes_below(n):\n    return [p for p in range(2, n) if all(p % d for d in range(2, p))]",
        ["assert primes_below(12) == [2, 3, 5, 7, 11]"],
    ),
    (
        "reverse_string",
        "def reverse_string(s):\n    return s[::-1]",
        ["assert reverse_string('abc') == 'cba'", "assert reverse_string('') == ''"],
    ),
    (
        "is_palindrome",
        "def is_palindrome(s):\n    t = ''.join(c.lower() for c in s if c.isalnum())\n    return t == t[::-1]",
        ["assert is_palindrome('A man, a plan, a canal: Panama')", "assert not is_palindrome('abc')"],
    ),
    (
        "count_vowels",
        "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)",
        ["assert count_vowels('Hello World') == 3"],
    ),
    (
        "capitalize_words",
        "def capitalize_words(s):\n    return ' '.join(w.capitalize() for w in s.split(' '))",
        ["assert capitalize_words('hello big world') == 'Hello Big World'"],
    ),
    (
        "word_count",
        "def word_count(s):\n    return len(s.split())",
        ["assert word_count(' a  b c ') == 3", "assert word_count('') == 0"],
    ),
    (
        "char_frequency",
        "def char_frequency(s):\n    out = {}\n    for c in s:\n        out[c] = out.get(c, 0) + 1\n    return out",
        ["assert char_frequency('aab') == {'a': 2, 'b': 1}"],
    ),
    (
        "most_common_char",
        "def most_common_char(s):\n    from collections import Counter\n    return Counter(s).most_common(1)[0][0]",
        ["assert most_common_char('abracadabra') == 'a'"],
    ),
    (
        "anagrams",
        "def anagrams(a, b):\n    return sorted(a) == sorted(b)",
        ["assert anagrams('listen', 'silent')", "assert not anagrams('a', 'b')"],
    ),
    (
        "remove_duplicates",
        "def remove_duplicates(xs):\n    seen = set()\n    return [x for x in xs if not (x in seen or seen.add(x))]",
        ["assert remove_duplicates([1, 2, 1, 3, 2]) == [1, 2, 3]"],
    ),
    (
        "flatten",
        "def flatten(xss):\n    return [x for xs in xss for x in xs]",
        ["assert flatten([[1, 2], [3], []]) == [1, 2, 3]"],
    ),
    (
        "deep_flatten",
        "def deep_flatten(x):\n    if not isinstance(x, list):\n        return [x]\n    return [y for item in x for y in deep_flatten(item)]",
        ["assert deep_flatten([1, [2, [3, [4]]]]) == [1, 2, 3, 4]"],
    ),
    (
        "chunk",
        "def chunk(xs, n):\n    return [xs[i:i + n] for i in range(0, len(xs), n)]",
        ["assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]"],
    ),
    (
        "rotate_left",
        "def rotate_left(xs, k):\n    k %= len(xs)\n    return xs[k:] + xs[:k]",
        ["assert rotate_left([1, 2, 3, 4], 1) == [2, 3, 4, 1]", "assert rotate_left([1, 2], 4) == [1, 2]"],
    ),
    (
        "zip_lists",
        "def zip_lists(a, b):\n    return [list(p) for p in zip(a, b)]",
        ["assert zip_lists([1, 2], ['a', 'b']) == [[1, 'a'], [2, 'b']]"],
    ),
    (
        "dedupe_sorted",
        "def dedupe_sorted(xs):\n    return sorted(set(xs))",
        ["assert dedupe_sorted([3, 1, 3, 2]) == [1, 2, 3]"],
    ),
    (
        "second_largest",
        "def second_largest(xs):\n    return sorted(set(xs))[-2]",
        ["assert second_largest([4, 1, 4, 3]) == 3"],
    ),
    (
        "binary_search",
        "def binary_search(xs, t):\n    lo, hi = 0, len(xs) - 1\n    while lo <= hi:\n        mid = (lo + hi) // 2\n        if xs[mid] == t:\n            return mid\n        lo, hi = (mid + 1, hi) if xs[mid] < t else (lo, mid - 1)\n    return -1",
        ["assert binary_search([1, 3, 5, 7], 5) == 2", "assert binary_search([1, 3], 4) == -1"],
    ),
    (
        "bubble_sort",
        "def bubble_sort(xs):\n    xs = list(xs)\n    for i in range(len(xs)):\n        for j in range(len(xs) - 1 - i):\n            if xs[j] > xs[j + 1]:\n                xs[j], xs[j + 1] = xs[j + 1], xs[j]\n    return xs",
        ["assert bubble_sort([3, 1, 2]) == [1, 2, 3]"],
    ),
    (
        "merge_sorted",
        "def merge_sorted(a, b):\n    import heapq\n    return list(heapq.merge(a, b))",
        ["assert merge_sorted([1, 4], [2, 3]) == [1, 2, 3, 4]"],
    ),
    (
        "to_binary",
        "def to_binary(n):\n    return bin(n)[2:]",
        ["assert to_binary(5) == '101'", "assert to_binary(0) == '0'"],
    ),
    ("from_binary", "def from_binary(s):\n    return int(s, 2)", ["assert from_binary('1101') == 13"]),
    (
        "digit_sum",
        "def digit_sum(n):\n    return sum(int(d) for d in str(abs(n)))",
        ["assert digit_sum(1234) == 10", "assert digit_sum(-56) == 11"],
    ),
    (
        "reverse_number",
        "def reverse_number(n):\n    return int(str(n)[::-1])",
        ["assert reverse_number(1230) == 321"],
    ),
    (
        "is_armstrong",
        "def is_armstrong(n):\n    d = str(n)\n    return n == sum(int(c) ** len(d) for c in d)",
        ["assert is_armstrong(153)", "assert not is_armstrong(154)"],
    ),
    (
        "collatz_steps",
        "def collatz_steps(n):\n    steps = 0\n    while n != 1:\n        n = n // 2 if n % 2 == 0 else 3 * n + 1\n        steps += 1\n    return steps",
        ["assert collatz_steps(6) == 8", "assert collatz_steps(1) == 0"],
    ),
    (
        "power_set_size",
        "def power_set_size(xs):\n    return 2 ** len(set(xs))",
        ["assert power_set_size([1, 2, 3]) == 8"],
    ),
    (
        "power_set",
        "def power_set(xs):\n    from itertools import combinations\n    return [list(c) for r in range(len(xs) + 1) for c in combinations(xs, r)]",
        ["assert len(power_set([1, 2, 3])) == 8", "assert [] in power_set([1])"],
    ),
    (
        "permutations_count",
        "def permutations_count(s):\n    from itertools import permutations\n    return len(set(permutations(s)))",
        ["assert permutations_count('aab') == 3"],
    ),
    (
        "celsius_to_f",
        "def celsius_to_f(c):\n    return c * 9 / 5 + 32",
        ["assert celsius_to_f(100) == 212", "assert celsius_to_f(0) == 32"],
    ),
    (
        "f_to_celsius",
        "def f_to_celsius(f):\n    return (f - 32) * 5 / 9",
        ["assert f_to_celsius(212) == 100"],
    ),
    (
        "leap_year",
        "def leap_year(y):\n    return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)",
        ["assert leap_year(2000)", "assert not leap_year(1900)", "assert leap_year(2024)"],
    ),
    (
        "days_in_month",
        "def days_in_month(y, m):\n    import calendar\n    return calendar.monthrange(y, m)[1]",
        ["assert days_in_month(2024, 2) == 29", "assert days_in_month(2023, 4) == 30"],
    ),
    (
        "fizzbuzz",
        "def fizzbuzz(n):\n    return 'FizzBuzz' if n % 15 == 0 else 'Fizz' if n % 3 == 0 else 'Buzz' if n % 5 == 0 else str(n)",
        ["assert fizzbuzz(15) == 'FizzBuzz'", "assert fizzbuzz(9) == 'Fizz'", "assert fizzbuzz(7) == '7'"],
    ),
    (
        "roman",
        "def roman(n):\n    vals = [(1000, 'M'), (900, 'CM'), (500, 'D'), (400, 'CD'), (100, 'C'), (90, 'XC'), (50, 'L'), (40, 'XL'), (10, 'X'), (9, 'IX'), (5, 'V'), (4, 'IV'), (1, 'I')]\n    out = ''\n    for v, s in vals:\n        while n >= v:\n            out += s\n            n -= v\n    return out",
        ["assert roman(1994) == 'MCMXCIV'", "assert roman(4) == 'IV'"],
    ),
    (
        "from_roman",
        "def from_roman(s):\n    v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\n    total = 0\n    for a, b in zip(s, s[1:] + ' '):\n        total += -v[a] if b != ' ' and v[a] < v[b] else v[a]\n    return total",
        ["assert from_roman('MCMXCIV') == 1994"],
    ),
    (
        "caesar",
        "def caesar(s, k):\n    return ''.join(chr((ord(c) - 97 + k) % 26 + 97) if c.islower() else c for c in s)",
        ["assert caesar('abc xyz', 3) == 'def abc'"],
    ),
    (
        "run_length",
        "def run_length(s):\n    from itertools import groupby\n    return ''.join(f'{k}{len(list(g))}' for k, g in groupby(s))",
        ["assert run_length('aaabcc') == 'a3b1c2'"],
    ),
    (
        "balanced",
        "def balanced(s):\n    pairs = {')': '(', ']': '[', '}': '{'}\n    stack = []\n    for c in s:\n        if c in '([{':\n            stack.append(c)\n        elif c in pairs:\n            if not stack or stack.pop() != pairs[c]:\n                return False\n    return not stack",
        ["assert balanced('([]{})')", "assert not balanced('(]')", "assert not balanced('((')"],
    ),
    (
        "matrix_transpose",
        "def matrix_transpose(m):\n    return [list(r) for r in zip(*m)]",
        ["assert matrix_transpose([[1, 2], [3, 4]]) == [[1, 3], [2, 4]]"],
    ),
    (
        "matrix_multiply",
        "def matrix_multiply(a, b):\n    return [[sum(x * y for x, y in zip(r, c)) for c in zip(*b)] for r in a]",
        ["assert matrix_multiply([[1, 2], [3, 4]], [[5, 6], [7, 8]]) == [[19, 22], [43, 50]]"],
    ),
    (
        "identity",
        "def identity(n):\n    return [[int(i == j) for j in range(n)] for i in range(n)]",
        ["assert identity(2) == [[1, 0], [0, 1]]"],
    ),
    (
        "dot",
        "def dot(a, b):\n    return sum(x * y for x, y in zip(a, b))",
        ["assert dot([1, 2, 3], [4, 5, 6]) == 32"],
    ),
    (
        "norm",
        "def norm(v):\n    import math\n    return math.sqrt(sum(x * x for x in v))",
        ["assert norm([3, 4]) == 5"],
    ),
    (
        "distance",
        "def distance(p, q):\n    import math\n    return math.dist(p, q)",
        ["assert distance((0, 0), (3, 4)) == 5"],
    ),
    (
        "triangle_area",
        "def triangle_area(a, b, c):\n    s = (a + b + c) / 2\n    return (s * (s - a) * (s - b) * (s - c)) ** 0.5",
        ["assert triangle_area(3, 4, 5) == 6"],
    ),
    (
        "circle_area",
        "def circle_area(r):\n    import math\n    return math.pi * r * r",
        ["assert abs(circle_area(1) - 3.14159) < 1e-4"],
    ),
    (
        "hypotenuse",
        "def hypotenuse(a, b):\n    return (a * a + b * b) ** 0.5",
        ["assert hypotenuse(5, 12) == 13"],
    ),
    (
        "clamp",
        "def clamp(x, lo, hi):\n    return max(lo, min(hi, x))",
        ["assert clamp(5, 0, 3) == 3", "assert clamp(-1, 0, 3) == 0", "assert clamp(2, 0, 3) == 2"],
    ),
    (
        "sign",
        "def sign(x):\n    return (x > 0) - (x < 0)",
        ["assert sign(-3) == -1", "assert sign(0) == 0", "assert sign(8) == 1"],
    ),
    (
        "count_occurrences",
        "def count_occurrences(xs, t):\n    return xs.count(t)",
        ["assert count_occurrences([1, 2, 1, 1], 1) == 3"],
    ),
    (
        "index_of",
        "def index_of(xs, t):\n    return xs.index(t) if t in xs else -1",
        ["assert index_of([5, 6, 7], 7) == 2", "assert index_of([], 1) == -1"],
    ),
    (
        "all_positive",
        "def all_positive(xs):\n    return all(x > 0 for x in xs)",
        ["assert all_positive([1, 2])", "assert not all_positive([1, -2])"],
    ),
    (
        "any_negative",
        "def any_negative(xs):\n    return any(x < 0 for x in xs)",
        ["assert any_negative([1, -2])", "assert not any_negative([])"],
    ),
    (
        "running_sum",
        "def running_sum(xs):\n    from itertools import accumulate\n    return list(accumulate(xs))",
        ["assert running_sum([1, 2, 3]) == [1, 3, 6]"],
    ),
    (
        "pairwise_diff",
        "def pairwise_diff(xs):\n    return [b - a for a, b in zip(xs, xs[1:])]",
        ["assert pairwise_diff([1, 4, 9]) == [3, 5]"],
    ),
    (
        "max_subarray",
        "def max_subarray(xs):\n    best = cur = xs[0]\n    for x in xs[1:]:\n        cur = max(x, cur + x)\n        best = max(best, cur)\n    return best",
        ["assert max_subarray([-2, 1, -3, 4, -1, 2, 1, -5, 4]) == 6"],
    ),
    (
        "two_sum",
        "def two_sum(xs, t):\n    seen = {}\n    for i, x in enumerate(xs):\n        if t - x in seen:\n            return [seen[t - x], i]\n        seen[x] = i\n    return []",
        ["assert two_sum([2, 7, 11, 15], 9) == [0, 1]"],
    ),
    (
        "missing_number",
        "def missing_number(xs):\n    n = len(xs)\n    return n * (n + 1) // 2 - sum(xs)",
        ["assert missing_number([3, 0, 1]) == 2"],
    ),
    (
        "single_number",
        "def single_number(xs):\n    out = 0\n    for x in xs:\n        out ^= x\n    return out",
        ["assert single_number([4, 1, 2, 1, 2]) == 4"],
    ),
    (
        "majority",
        "def majority(xs):\n    from collections import Counter\n    return Counter(xs).most_common(1)[0][0]",
        ["assert majority([2, 2, 1, 1, 2]) == 2"],
    ),
    (
        "climb_stairs",
        "def climb_stairs(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a",
        ["assert climb_stairs(5) == 8"],
    ),
    (
        "coin_change",
        "def coin_change(coins, amount):\n    best = [0] + [amount + 1] * amount\n    for a in range(1, amount + 1):\n        for c in coins:\n            if c <= a:\n                best[a] = min(best[a], best[a - c] + 1)\n    return best[amount] if best[amount] <= amount else -1",
        ["assert coin_change([1, 2, 5], 11) == 3", "assert coin_change([2], 3) == -1"],
    ),
    (
        "lis_length",
        "def lis_length(xs):\n    import bisect\n    tails = []\n    for x in xs:\n        i = bisect.bisect_left(tails, x)\n        tails[i:i + 1] = [x]\n    return len(tails)",
        ["assert lis_length([10, 9, 2, 5, 3, 7, 101, 18]) == 4"],
    ),
    (
        "edit_distance",
        "def edit_distance(a, b):\n    prev = list(range(len(b) + 1))\n    for i, ca in enumerate(a, 1):\n        cur = [i]\n        for j, cb in enumerate(b, 1):\n            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))\n        prev = cur\n    return prev[-1]",
        ["assert edit_distance('kitten', 'sitting') == 3"],
    ),
    (
        "lcs_length",
        "def lcs_length(a, b):\n    from functools import lru_cache\n    @lru_cache(None)\n    def f(i, j):\n        if i == len(a) or j == len(b):\n            return 0\n        return 1 + f(i + 1, j + 1) if a[i] == b[j] else max(f(i + 1, j), f(i, j + 1))\n    return f(0, 0)",
        ["assert lcs_length('abcde', 'ace') == 3"],
    ),
    (
        "knapsack",
        "def knapsack(items, cap):\n    best = [0] * (cap + 1)\n    for w, v in items:\n        for c in range(cap, w - 1, -1):\n            best[c] = max(best[c], best[c - w] + v)\n    return best[cap]",
        ["assert knapsack([(1, 1), (3, 4), (4, 5), (5, 7)], 7) == 9"],
    ),
    (
        "count_islands",
        "def count_islands(grid):\n    seen = set()\n    def fill(r, c):\n        stack = [(r, c)]\n        while stack:\n            r, c = stack.pop()\n            if (r, c) in seen or not (0 <= r < len(grid) and 0 <= c < len(grid[0])) or grid[r][c] != 1:\n                continue\n            seen.add((r, c))\n            stack += [(r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)]\n    n = 0\n    for r in range(len(grid)):\n        for c in range(len(grid[0])):\n            if grid[r][c] == 1 and (r, c) not in seen:\n                fill(r, c)\n                n += 1\n    return n",
        ["assert count_islands([[1, 1, 0], [0, 0, 0], [0, 1, 1]]) == 2"],
    ),
    (
        "bfs_distance",
        "def bfs_distance(graph, a, b):\n    from collections import deque\n    q, dist = deque([a]), {a: 0}\n    while q:\n        n = q.popleft()\n        for m in graph.get(n, []):\n            if m not in dist:\n                dist[m] = dist[n] + 1\n                q.append(m)\n    return dist.get(b, -1)",
        [
            "assert bfs_distance({1: [2], 2: [3], 3: []}, 1, 3) == 2",
            "assert bfs_distance({1: []}, 1, 2) == -1",
        ],
    ),
    (
        "topo_sort",
        "def topo_sort(deps):\n    from graphlib import TopologicalSorter\n    return list(TopologicalSorter(deps).static_order())",
        [
            "order = topo_sort({'b': {'a'}, 'c': {'b'}})\nassert order.index('a') < order.index('b') < order.index('c')"
        ],
    ),
    (
        "has_cycle",
        "def has_cycle(graph):\n    state = {}\n    def visit(n):\n        if state.get(n) == 1:\n            return True\n        if state.get(n) == 2:\n            return False\n        state[n] = 1\n        if any(visit(m) for m in graph.get(n, [])):\n            return True\n        state[n] = 2\n        return False\n    return any(visit(n) for n in graph)",
        ["assert has_cycle({1: [2], 2: [1]})", "assert not has_cycle({1: [2], 2: []})"],
    ),
    (
        "snake_case",
        "def snake_case(s):\n    import re\n    return re.sub(r'(?<!^)(?=[A-Z])', '_', s).lower()",
        ["assert snake_case('HelloWorldAgain') == 'hello_world_again'"],
    ),
    (
        "camel_case",
        "def camel_case(s):\n    head, *rest = s.split('_')\n    return head + ''.join(w.title() for w in rest)",
        ["assert camel_case('hello_big_world') == 'helloBigWorld'"],
    ),
    (
        "extract_numbers",
        "def extract_numbers(s):\n    import re\n    return [int(x) for x in re.findall(r'-?\\d+', s)]",
        ["assert extract_numbers('a1b-22c333') == [1, -22, 333]"],
    ),
    (
        "is_valid_email",
        "def is_valid_email(s):\n    import re\n    return re.fullmatch(r'[\\w.+-]+@[\\w-]+\\.[\\w.]+', s) is not None",
        ["assert is_valid_email('a.b@example.com')", "assert not is_valid_email('nope@')"],
    ),
    (
        "json_roundtrip",
        "def json_roundtrip(obj):\n    import json\n    return json.loads(json.dumps(obj))",
        ["assert json_roundtrip({'a': [1, 2]}) == {'a': [1, 2]}"],
    ),
    (
        "parse_csv_line",
        "def parse_csv_line(line):\n    import csv\n    return next(csv.reader([line]))",
        ["assert parse_csv_line('a,\"b,c\",d') == ['a', 'b,c', 'd']"],
    ),
    (
        "word_lengths",
        "def word_lengths(s):\n    return {w: len(w) for w in s.split()}",
        ["assert word_lengths('hi there') == {'hi': 2, 'there': 5}"],
    ),
    (
        "longest_word",
        "def longest_word(s):\n    return max(s.split(), key=len)",
        ["assert longest_word('a quick brownish fox') == 'brownish'"],
    ),
    (
        "title_count",
        "def title_count(s):\n    return sum(w.istitle() for w in s.split())",
        ["assert title_count('Hello there Big World') == 3"],
    ),
    (
        "invert_dict",
        "def invert_dict(d):\n    return {v: k for k, v in d.items()}",
        ["assert invert_dict({'a': 1, 'b': 2}) == {1: 'a', 2: 'b'}"],
    ),
    (
        "merge_dicts",
        "def merge_dicts(a, b):\n    return {**a, **b}",
        ["assert merge_dicts({'a': 1}, {'a': 2, 'b': 3}) == {'a': 2, 'b': 3}"],
    ),
    (
        "group_by_length",
        "def group_by_length(words):\n    from collections import defaultdict\n    out = defaultdict(list)\n    for w in words:\n        out[len(w)].append(w)\n    return dict(out)",
        ["assert group_by_length(['a', 'bb', 'c']) == {1: ['a', 'c'], 2: ['bb']}"],
    ),
    (
        "sort_by_value",
        "def sort_by_value(d):\n    return [k for k, _ in sorted(d.items(), key=lambda kv: kv[1])]",
        ["assert sort_by_value({'a': 3, 'b': 1, 'c': 2}) == ['b', 'c', 'a']"],
    ),
    (
        "top_k",
        "def top_k(xs, k):\n    import heapq\n    return heapq.nlargest(k, xs)",
        ["assert top_k([5, 1, 9, 3], 2) == [9, 5]"],
    ),
    (
        "fraction_sum",
        "def fraction_sum(a, b):\n    from fractions import Fraction\n    return Fraction(*a) + Fraction(*b)",
        ["from fractions import Fraction\nassert fraction_sum((1, 2), (1, 3)) == Fraction(5, 6)"],
    ),
    (
        "decimal_round",
        "def decimal_round(x, places):\n    from decimal import Decimal, ROUND_HALF_UP\n    return float(Decimal(str(x)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))",
        ["assert decimal_round(2.675, 2) == 2.68"],
    ),
    (
        "stdev",
        "def stdev(xs):\n    import statistics\n    return statistics.pstdev(xs)",
        ["assert stdev([2, 4, 4, 4, 5, 5, 7, 9]) == 2"],
    ),
    (
        "dataclass_point",
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n    def manhattan(self):\n        return abs(self.x) + abs(self.y)",
        ["assert Point(3, -4).manhattan() == 7", "assert Point(1, 2) == Point(1, 2)"],
    ),
    (
        "stack_class",
        "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n        self.items.append(x)\n    def pop(self):\n        return self.items.pop()\n    def __len__(self):\n        return len(self.items)",
        ["s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2 and len(s) == 1"],
    ),
    (
        "queue_two_stacks",
        "class Queue:\n    def __init__(self):\n        self.a, self.b = [], []\n    def put(self, x):\n        self.a.append(x)\n    def get(self):\n        if not self.b:\n            while self.a:\n                self.b.append(self.a.pop())\n        return self.b.pop()",
        ["q = Queue()\nq.put(1)\nq.put(2)\nassert q.get() == 1\nq.put(3)\nassert q.get() == 2"],
    ),
    (
        "lru_cache_class",
        "from collections import OrderedDict\nclass LRU:\n    def __init__(self, cap):\n        self.cap, self.d = cap, OrderedDict()\n    def get(self, k):\n        if k not in self.d:\n            return -1\n        self.d.move_to_end(k)\n        return self.d[k]\n    def put(self, k, v):\n        self.d[k] = v\n        self.d.move_to_end(k)\n        if len(self.d) > self.cap:\n            self.d.popitem(last=False)",
        [
            "c = LRU(2)\nc.put(1, 1)\nc.put(2, 2)\nc.get(1)\nc.put(3, 3)\nassert c.get(2) == -1 and c.get(1) == 1"
        ],
    ),
    (
        "counter_generator",
        "def counter(start, step):\n    while True:\n        yield start\n        start += step",
        ["g = counter(3, 2)\nassert [next(g) for _ in range(3)] == [3, 5, 7]"],
    ),
    (
        "compose",
        "def compose(f, g):\n    return lambda x: f(g(x))",
        ["assert compose(lambda x: x + 1, lambda x: x * 2)(5) == 11"],
    ),
    (
        "memo_fib",
        "from functools import lru_cache\n@lru_cache(None)\ndef memo_fib(n):\n    return n if n < 2 else memo_fib(n - 1) + memo_fib(n - 2)",
        ["assert memo_fib(60) == 1548008755920"],
    ),
    (
        "safe_divide",
        "def safe_divide(a, b):\n    try:\n        return a / b\n    except ZeroDivisionError:\n        return None",
        ["assert safe_divide(6, 3) == 2", "assert safe_divide(1, 0) is None"],
    ),
    (
        "validate_age",
        "def validate_age(x):\n    if not isinstance(x, int) or x < 0:\n        raise ValueError('age must be a non-negative int')\n    return x",
        [
            "assert validate_age(3) == 3",
            "try:\n    validate_age(-1)\n    raise AssertionError('no error')\nexcept ValueError:\n    pass",
        ],
    ),
    (
        "enum_color",
        "from enum import Enum\nclass Color(Enum):\n    RED = 1\n    GREEN = 2\ndef color_name(v):\n    return Color(v).name",
        ["assert color_name(2) == 'GREEN'"],
    ),
    (
        "bits_set",
        "def bits_set(n):\n    return bin(n).count('1')",
        ["assert bits_set(255) == 8", "assert bits_set(0) == 0"],
    ),
    (
        "is_power_of_two",
        "def is_power_of_two(n):\n    return n > 0 and n & (n - 1) == 0",
        ["assert is_power_of_two(64)", "assert not is_power_of_two(6)"],
    ),
    (
        "hamming",
        "def hamming(a, b):\n    return sum(x != y for x, y in zip(a, b))",
        ["assert hamming('karolin', 'kathrin') == 3"],
    ),
    (
        "string_compress",
        "def string_compress(s):\n    import zlib\n    return zlib.decompress(zlib.compress(s.encode())).decode()",
        ["assert string_compress('abc' * 10) == 'abc' * 10"],
    ),
    (
        "sha_prefix",
        "def sha_prefix(s):\n    import hashlib\n    return hashlib.sha256(s.encode()).hexdigest()[:8]",
        ["assert sha_prefix('abc') == 'ba7816bf'"],
    ),
    (
        "base64_roundtrip",
        "def base64_roundtrip(s):\n    import base64\n    return base64.b64decode(base64.b64encode(s.encode())).decode()",
        ["assert base64_roundtrip('héllo') == 'héllo'"],
    ),
    (
        "date_diff",
        "def date_diff(a, b):\n    from datetime import date\n    return (date.fromisoformat(b) - date.fromisoformat(a)).days",
        ["assert date_diff('2024-01-01', '2024-03-01') == 60"],
    ),
    (
        "weekday_name",
        "def weekday_name(s):\n    from datetime import date\n    return date.fromisoformat(s).strftime('%A')",
        ["assert weekday_name('2024-01-01') == 'Monday'"],
    ),
    (
        "spiral_order",
        "def spiral_order(m):\n    out = []\n    while m:\n        out += m.pop(0)\n        m = [list(r) for r in zip(*m)][::-1]\n    return out",
        ["assert spiral_order([[1, 2, 3], [4, 5, 6], [7, 8, 9]]) == [1, 2, 3, 6, 9, 8, 7, 4, 5]"],
    ),
    (
        "pascal_row",
        "def pascal_row(n):\n    from math import comb\n    return [comb(n, k) for k in range(n + 1)]",
        ["assert pascal_row(4) == [1, 4, 6, 4, 1]"],
    ),
    ("triangular", "def triangular(n):\n    return n * (n + 1) // 2", ["assert triangular(10) == 55"]),
    (
        "perfect_number",
        "def perfect_number(n):\n    return n > 1 and sum(d for d in range(1, n) if n % d == 0) == n",
        ["assert perfect_number(28)", "assert not perfect_number(12)"],
    ),
    (
        "nth_prime",
        "def nth_prime(n):\n    found, k = 0, 1\n    while found < n:\n        k += 1\n        if all(k % d for d in range(2, int(k ** 0.5) + 1)):\n            found += 1\n    return k",
        ["assert nth_prime(10) == 29"],
    ),
    (
        "prime_factors",
        "def prime_factors(n):\n    out, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    return out + ([n] if n > 1 else [])",
        ["assert prime_factors(84) == [2, 2, 3, 7]"],
    ),
    (
        "digits_to_words",
        "def digits_to_words(n):\n    names = 'zero one two three four five six seven eight nine'.split()\n    return ' '.join(names[int(d)] for d in str(n))",
        ["assert digits_to_words(407) == 'four zero seven'"],
    ),
    ("mode_answer", "sorted([3, 1, 2])", ["assert result == [1, 2, 3]"]),
    ("last_expression", "x = 6\nx * 7", ["assert result == 42"]),
]


FORMS = ("assert", "call", "io")


def rows(form: str = "assert") -> list[tuple[dict, str]]:
    """(row, completion) per task: the row the python_tests verifier reads, the planted solution.

    form "assert": the tasks' assert scripts; "call": each `assert f(args) == value` as a call test (a task
    whose asserts are not all of that shape keeps them); "io": the solution wrapped in a script that reads the
    arguments as JSON from stdin and prints the result as JSON, with the expected value as expected stdout.
    """
    out = []
    for name, solution, tests in TASKS:
        calls = [_as_call(test) for test in tests]
        if form == "assert" or None in calls:
            out.append(({"prompt": f"Write `{name}`.", "tests": tests}, f"```python\n{solution}\n```"))
        elif form == "call":
            out.append(({"prompt": f"Write `{name}`.", "tests": calls}, f"```python\n{solution}\n```"))
        else:
            script = f"{solution}\nimport json, sys\nfn, args = json.loads(sys.stdin.read())\n"
            script += "print(json.dumps(globals()[fn](*args)))\n"
            io = [
                {
                    "stdin": json.dumps([call["call"], call["args"]]),
                    "stdout": json.dumps(call["expected"]) + "\n",
                }
                for call in calls
            ]
            out.append(({"prompt": f"Write `{name}`.", "tests": io}, f"```python\n{script}```"))
    return out


def _as_call(test: str) -> dict | None:
    """`assert f(1, 2) == 3` as {"call": "f", "args": [1, 2], "expected": 3}; None for any other shape."""
    try:
        node = ast.parse(test).body[0]
        compare = node.test
        call, (expected,) = compare.left, compare.comparators
        if not (isinstance(compare.ops[0], ast.Eq) and isinstance(call, ast.Call) and not call.keywords):
            return None
        args = [ast.literal_eval(arg) for arg in call.args]
        if json.loads(json.dumps(args)) != args:  # dicts with int keys: JSON would change the arguments
            return None
        return {"call": call.func.id, "args": args, "expected": ast.literal_eval(expected)}
    except (AttributeError, IndexError, ValueError, TypeError, SyntaxError):
        return None
