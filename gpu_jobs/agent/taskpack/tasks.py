"""The task definitions of the repo-fix pack: each a small module, the bug planted in it, and its tests.

A task is written once, correct; `bug` is an (old, new) text replacement that plants the bug in `source`.
`gpu_jobs.agent.taskpack.pack_rows` turns each into a dataset row (the buggy files, the tests, the fix).
Every task has tests that the bug fails and tests it still passes, so "no fix" scores a share between 0 and 1.

Past 400 lines: it is data, the task pack's repositories and their fixes written out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    name: str
    module: str  # the file holding the code under test, e.g. "textutil.py"
    source: str  # the correct module
    bug: tuple[str, str]  # (old, new): replaced once in `source` to plant the bug
    tests: str  # a unittest module, saved as tests/test_<module>
    hint: str  # what the issue reporter saw, put in the task prompt


def _t(name: str, module: str, source: str, bug: tuple[str, str], tests: str, hint: str) -> Task:
    return Task(name, module, source.strip() + "\n", bug, tests.strip() + "\n", hint)


TASKS: tuple[Task, ...] = (
    _t(
        "clamp",
        "bounds.py",
        """
def clamp(value, low, high):
    \"\"\"value limited to [low, high].\"\"\"
    if value < low:
        return low
    if value > high:
        return high
    return value
""",
        ("    if value > high:\n        return high", "    if value > high:\n        return low"),
        """
import unittest
from bounds import clamp

class ClampTest(unittest.TestCase):
    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)
    def test_below(self):
        self.assertEqual(clamp(-3, 0, 10), 0)
    def test_above(self):
        self.assertEqual(clamp(42, 0, 10), 10)
""",
        "clamp(42, 0, 10) returns 0",
    ),
    _t(
        "mean",
        "stats.py",
        """
def mean(values):
    \"\"\"Arithmetic mean; ValueError on an empty list.\"\"\"
    if not values:
        raise ValueError("mean of nothing")
    return sum(values) / len(values)
""",
        ("return sum(values) / len(values)", "return sum(values) / (len(values) + 1)"),
        """
import unittest
from stats import mean

class MeanTest(unittest.TestCase):
    def test_simple(self):
        self.assertEqual(mean([2, 4]), 3)
    def test_single(self):
        self.assertEqual(mean([7]), 7)
    def test_empty(self):
        with self.assertRaises(ValueError):
            mean([])
""",
        "mean([2, 4]) is not 3",
    ),
    _t(
        "is_palindrome",
        "words.py",
        """
def is_palindrome(text):
    \"\"\"True when text reads the same backwards, ignoring case and spaces.\"\"\"
    cleaned = "".join(ch.lower() for ch in text if not ch.isspace())
    return cleaned == cleaned[::-1]
""",
        ("ch.lower() for ch in text", "ch for ch in text"),
        """
import unittest
from words import is_palindrome

class PalindromeTest(unittest.TestCase):
    def test_plain(self):
        self.assertTrue(is_palindrome("level"))
    def test_mixed_case(self):
        self.assertTrue(is_palindrome("Never odd or even"))
    def test_not(self):
        self.assertFalse(is_palindrome("python"))
""",
        "mixed-case palindromes are rejected",
    ),
    _t(
        "word_count",
        "counting.py",
        """
def word_count(text):
    \"\"\"How often each whitespace-separated word occurs, case-insensitively.\"\"\"
    counts = {}
    for word in text.lower().split():
        counts[word] = counts.get(word, 0) + 1
    return counts
""",
        ("counts.get(word, 0) + 1", "1"),
        """
import unittest
from counting import word_count

class WordCountTest(unittest.TestCase):
    def test_once(self):
        self.assertEqual(word_count("a b"), {"a": 1, "b": 1})
    def test_repeated(self):
        self.assertEqual(word_count("a A a"), {"a": 3})
    def test_empty(self):
        self.assertEqual(word_count(""), {})
""",
        "repeated words are counted once",
    ),
    _t(
        "fizzbuzz",
        "fizz.py",
        """
def fizzbuzz(n):
    if n % 15 == 0:
        return "FizzBuzz"
    if n % 3 == 0:
        return "Fizz"
    if n % 5 == 0:
        return "Buzz"
    return str(n)
""",
        ("if n % 15 == 0:", "if n % 10 == 0:"),
        """
import unittest
from fizz import fizzbuzz

class FizzBuzzTest(unittest.TestCase):
    def test_number(self):
        self.assertEqual(fizzbuzz(7), "7")
    def test_fizz(self):
        self.assertEqual(fizzbuzz(9), "Fizz")
    def test_fizzbuzz(self):
        self.assertEqual(fizzbuzz(30), "FizzBuzz")
    def test_buzz(self):
        self.assertEqual(fizzbuzz(10), "Buzz")
""",
        "fizzbuzz(10) says FizzBuzz",
    ),
    _t(
        "factorial",
        "combinatorics.py",
        """
def factorial(n):
    if n < 0:
        raise ValueError("negative")
    result = 1
    for k in range(2, n + 1):
        result *= k
    return result
""",
        ("range(2, n + 1)", "range(2, n)"),
        """
import unittest
from combinatorics import factorial

class FactorialTest(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(factorial(0), 1)
    def test_five(self):
        self.assertEqual(factorial(5), 120)
    def test_negative(self):
        with self.assertRaises(ValueError):
            factorial(-1)
""",
        "factorial(5) is 24",
    ),
    _t(
        "fibonacci",
        "sequences.py",
        """
def fibonacci(n):
    \"\"\"The n-th Fibonacci number, fibonacci(0) == 0.\"\"\"
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
""",
        ("a, b = b, a + b", "a, b = b, a + b + 1"),
        """
import unittest
from sequences import fibonacci

class FibonacciTest(unittest.TestCase):
    def test_zero(self):
        self.assertEqual(fibonacci(0), 0)
    def test_one(self):
        self.assertEqual(fibonacci(1), 1)
    def test_ten(self):
        self.assertEqual(fibonacci(10), 55)
""",
        "fibonacci(10) is too large",
    ),
    _t(
        "chunk",
        "listing.py",
        """
def chunk(items, size):
    \"\"\"items in consecutive lists of `size` (the last may be shorter).\"\"\"
    return [items[i : i + size] for i in range(0, len(items), size)]
""",
        ("range(0, len(items), size)", "range(0, len(items) - 1, size)"),
        """
import unittest
from listing import chunk

class ChunkTest(unittest.TestCase):
    def test_even(self):
        self.assertEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]])
    def test_odd(self):
        self.assertEqual(chunk([1, 2, 3], 2), [[1, 2], [3]])
    def test_single(self):
        self.assertEqual(chunk([1], 1), [[1]])
""",
        "chunk([1], 1) drops the item",
    ),
    _t(
        "flatten",
        "nesting.py",
        """
def flatten(nested):
    \"\"\"Every non-list item of arbitrarily nested lists, in order.\"\"\"
    out = []
    for item in nested:
        if isinstance(item, list):
            out.extend(flatten(item))
        else:
            out.append(item)
    return out
""",
        ("out.extend(flatten(item))", "out.extend(item)"),
        """
import unittest
from nesting import flatten

class FlattenTest(unittest.TestCase):
    def test_flat(self):
        self.assertEqual(flatten([1, 2]), [1, 2])
    def test_one_level(self):
        self.assertEqual(flatten([1, [2, 3]]), [1, 2, 3])
    def test_deep(self):
        self.assertEqual(flatten([1, [2, [3, [4]]]]), [1, 2, 3, 4])
""",
        "deeply nested lists stay nested",
    ),
    _t(
        "dedupe",
        "unique.py",
        """
def dedupe(items):
    \"\"\"items without repeats, first occurrence kept, order preserved.\"\"\"
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
""",
        ("            seen.add(item)\n", ""),
        """
import unittest
from unique import dedupe

class DedupeTest(unittest.TestCase):
    def test_no_repeats(self):
        self.assertEqual(dedupe([3, 1, 2]), [3, 1, 2])
    def test_repeats(self):
        self.assertEqual(dedupe([1, 2, 1, 3, 2]), [1, 2, 3])
    def test_empty(self):
        self.assertEqual(dedupe([]), [])
""",
        "dedupe keeps repeats",
    ),
    _t(
        "capitalize_words",
        "titles.py",
        """
def capitalize_words(text):
    \"\"\"Each space-separated word with its first letter upper-cased.\"\"\"
    return " ".join(word[:1].upper() + word[1:] for word in text.split(" "))
""",
        ("word[:1].upper() + word[1:]", "word[:1].upper() + word[2:]"),
        """
import unittest
from titles import capitalize_words

class CapitalizeTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(capitalize_words("hello world"), "Hello World")
    def test_empty(self):
        self.assertEqual(capitalize_words(""), "")
    def test_single_letters(self):
        self.assertEqual(capitalize_words("a b"), "A B")
""",
        "letters go missing from words",
    ),
    _t(
        "roman",
        "roman.py",
        """
NUMERALS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
            (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(number):
    out = ""
    for value, letters in NUMERALS:
        while number >= value:
            out += letters
            number -= value
    return out
""",
        ('(4, "IV"), ', ""),
        """
import unittest
from roman import to_roman

class RomanTest(unittest.TestCase):
    def test_three(self):
        self.assertEqual(to_roman(3), "III")
    def test_four(self):
        self.assertEqual(to_roman(4), "IV")
    def test_big(self):
        self.assertEqual(to_roman(1990), "MCMXC")
""",
        "to_roman(4) gives IIII",
    ),
    _t(
        "binary_search",
        "search.py",
        """
def binary_search(items, target):
    \"\"\"Index of target in the sorted list items, or -1.\"\"\"
    low, high = 0, len(items) - 1
    while low <= high:
        middle = (low + high) // 2
        if items[middle] == target:
            return middle
        if items[middle] < target:
            low = middle + 1
        else:
            high = middle - 1
    return -1
""",
        ("while low <= high:", "while low < high:"),
        """
import unittest
from search import binary_search

class SearchTest(unittest.TestCase):
    def test_middle(self):
        self.assertEqual(binary_search([1, 3, 5], 3), 1)
    def test_missing(self):
        self.assertEqual(binary_search([1, 3, 5], 4), -1)
    def test_last(self):
        self.assertEqual(binary_search([1, 3, 5], 5), 2)
    def test_single(self):
        self.assertEqual(binary_search([7], 7), 0)
""",
        "the last element is never found",
    ),
    _t(
        "gcd",
        "arith.py",
        """
def gcd(a, b):
    a, b = abs(a), abs(b)
    while b:
        a, b = b, a % b
    return a
""",
        ("a, b = abs(a), abs(b)", "a, b = a, b"),
        """
import unittest
from arith import gcd

class GcdTest(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(gcd(12, 18), 6)
    def test_coprime(self):
        self.assertEqual(gcd(7, 5), 1)
    def test_negative(self):
        self.assertEqual(gcd(12, -18), 6)
""",
        "gcd(12, -18) is negative",
    ),
    _t(
        "is_prime",
        "primes.py",
        """
def is_prime(n):
    if n < 2:
        return False
    k = 2
    while k * k <= n:
        if n % k == 0:
            return False
        k += 1
    return True
""",
        ("while k * k <= n:", "while k * k < n:"),
        """
import unittest
from primes import is_prime

class PrimeTest(unittest.TestCase):
    def test_small(self):
        self.assertTrue(is_prime(7))
    def test_one(self):
        self.assertFalse(is_prime(1))
    def test_square(self):
        self.assertFalse(is_prime(49))
""",
        "is_prime(49) is True",
    ),
    _t(
        "celsius",
        "temperature.py",
        """
def to_fahrenheit(celsius):
    return celsius * 9 / 5 + 32


def to_celsius(fahrenheit):
    return (fahrenheit - 32) * 5 / 9
""",
        ("(fahrenheit - 32) * 5 / 9", "fahrenheit - 32 * 5 / 9"),
        """
import unittest
from temperature import to_celsius, to_fahrenheit

class TemperatureTest(unittest.TestCase):
    def test_to_f(self):
        self.assertEqual(to_fahrenheit(100), 212)
    def test_to_c(self):
        self.assertEqual(to_celsius(212), 100)
    def test_freezing(self):
        self.assertEqual(to_celsius(32), 0)
""",
        "to_celsius(212) is wrong",
    ),
    _t(
        "parse_kv",
        "config.py",
        """
def parse_kv(text):
    \"\"\"'a=1; b=2' -> {'a': '1', 'b': '2'}; blanks around keys and values are dropped.\"\"\"
    out = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        out[key.strip()] = value.strip()
    return out
""",
        ("out[key.strip()] = value.strip()", "out[key] = value.strip()"),
        """
import unittest
from config import parse_kv

class ParseTest(unittest.TestCase):
    def test_one(self):
        self.assertEqual(parse_kv("a=1"), {"a": "1"})
    def test_two(self):
        self.assertEqual(parse_kv("a=1; b=2"), {"a": "1", "b": "2"})
    def test_empty(self):
        self.assertEqual(parse_kv(""), {})
""",
        "keys keep their leading spaces",
    ),
    _t(
        "running_total",
        "accumulate.py",
        """
def running_total(values):
    total = 0
    out = []
    for value in values:
        total += value
        out.append(total)
    return out
""",
        (
            "        total += value\n        out.append(total)",
            "        out.append(total)\n        total += value",
        ),
        """
import unittest
from accumulate import running_total

class RunningTotalTest(unittest.TestCase):
    def test_values(self):
        self.assertEqual(running_total([1, 2, 3]), [1, 3, 6])
    def test_empty(self):
        self.assertEqual(running_total([]), [])
    def test_one(self):
        self.assertEqual(running_total([5]), [5])
""",
        "the totals lag one behind",
    ),
    _t(
        "reverse_words",
        "sentences.py",
        """
def reverse_words(sentence):
    return " ".join(reversed(sentence.split()))
""",
        ("reversed(sentence.split())", "sentence.split()"),
        """
import unittest
from sentences import reverse_words

class ReverseTest(unittest.TestCase):
    def test_two(self):
        self.assertEqual(reverse_words("hello world"), "world hello")
    def test_one(self):
        self.assertEqual(reverse_words("hi"), "hi")
    def test_empty(self):
        self.assertEqual(reverse_words(""), "")
""",
        "words are not reversed",
    ),
    _t(
        "count_vowels",
        "vowels.py",
        """
def count_vowels(text):
    return sum(1 for ch in text.lower() if ch in "aeiou")
""",
        ('if ch in "aeiou"', 'if ch in "aeio"'),
        """
import unittest
from vowels import count_vowels

class VowelTest(unittest.TestCase):
    def test_word(self):
        self.assertEqual(count_vowels("banana"), 3)
    def test_upper(self):
        self.assertEqual(count_vowels("AEIOU"), 5)
    def test_none(self):
        self.assertEqual(count_vowels("xyz"), 0)
""",
        "'u' is not counted",
    ),
    _t(
        "merge_sorted",
        "merging.py",
        """
def merge_sorted(left, right):
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if left[i] <= right[j]:
            out.append(left[i])
            i += 1
        else:
            out.append(right[j])
            j += 1
    out.extend(left[i:])
    out.extend(right[j:])
    return out
""",
        ("    out.extend(right[j:])\n", ""),
        """
import unittest
from merging import merge_sorted

class MergeTest(unittest.TestCase):
    def test_interleaved(self):
        self.assertEqual(merge_sorted([1, 4], [2, 3, 5]), [1, 2, 3, 4, 5])
    def test_left_longer(self):
        self.assertEqual(merge_sorted([1, 2, 9], [3]), [1, 2, 3, 9])
    def test_empty(self):
        self.assertEqual(merge_sorted([], []), [])
""",
        "the tail of the right list is lost",
    ),
    _t(
        "stack",
        "stack.py",
        """
class Stack:
    def __init__(self):
        self._items = []

    def push(self, item):
        self._items.append(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty stack")
        return self._items.pop()

    def __len__(self):
        return len(self._items)
""",
        ("return self._items.pop()", "return self._items.pop(0)"),
        """
import unittest
from stack import Stack

class StackTest(unittest.TestCase):
    def test_lifo(self):
        s = Stack()
        s.push(1)
        s.push(2)
        self.assertEqual(s.pop(), 2)
    def test_len(self):
        s = Stack()
        s.push(1)
        self.assertEqual(len(s), 1)
    def test_empty(self):
        with self.assertRaises(IndexError):
            Stack().pop()
""",
        "pop returns the oldest item",
    ),
    _t(
        "bank_account",
        "bank.py",
        """
class Account:
    def __init__(self, balance=0):
        self.balance = balance

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount

    def withdraw(self, amount):
        if amount > self.balance:
            raise ValueError("insufficient funds")
        self.balance -= amount
""",
        ("if amount > self.balance:", "if amount > self.balance + 100:"),
        """
import unittest
from bank import Account

class AccountTest(unittest.TestCase):
    def test_deposit(self):
        a = Account()
        a.deposit(5)
        self.assertEqual(a.balance, 5)
    def test_withdraw(self):
        a = Account(10)
        a.withdraw(4)
        self.assertEqual(a.balance, 6)
    def test_overdraw(self):
        with self.assertRaises(ValueError):
            Account(10).withdraw(50)
""",
        "accounts can be overdrawn",
    ),
    _t(
        "slugify",
        "slugs.py",
        """
import re


def slugify(title):
    \"\"\"Lower-case words joined by single dashes; everything but letters and digits dropped.\"\"\"
    words = re.findall(r"[a-z0-9]+", title.lower())
    return "-".join(words)
""",
        ('r"[a-z0-9]+"', 'r"[a-z]+"'),
        """
import unittest
from slugs import slugify

class SlugTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")
    def test_digits(self):
        self.assertEqual(slugify("Top 10 tips"), "top-10-tips")
    def test_spaces(self):
        self.assertEqual(slugify("  a   b "), "a-b")
""",
        "digits vanish from slugs",
    ),
    _t(
        "median",
        "middle.py",
        """
def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2
""",
        ("ordered = sorted(values)", "ordered = list(values)"),
        """
import unittest
from middle import median

class MedianTest(unittest.TestCase):
    def test_sorted_odd(self):
        self.assertEqual(median([1, 2, 3]), 2)
    def test_unsorted(self):
        self.assertEqual(median([3, 1, 2]), 2)
    def test_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)
""",
        "median of an unsorted list is wrong",
    ),
    _t(
        "caesar",
        "cipher.py",
        """
def caesar(text, shift):
    out = []
    for ch in text:
        if ch.isalpha() and ch.islower():
            out.append(chr((ord(ch) - ord("a") + shift) % 26 + ord("a")))
        else:
            out.append(ch)
    return "".join(out)
""",
        ('% 26 + ord("a")', '+ ord("a")'),
        """
import unittest
from cipher import caesar

class CaesarTest(unittest.TestCase):
    def test_shift(self):
        self.assertEqual(caesar("abc", 1), "bcd")
    def test_wrap(self):
        self.assertEqual(caesar("xyz", 3), "abc")
    def test_other(self):
        self.assertEqual(caesar("a b!", 0), "a b!")
""",
        "letters past z do not wrap around",
    ),
    _t(
        "leap_year",
        "calendar_rules.py",
        """
def is_leap(year):
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
""",
        ("(year % 100 != 0 or year % 400 == 0)", "year % 100 != 0"),
        """
import unittest
from calendar_rules import is_leap

class LeapTest(unittest.TestCase):
    def test_common(self):
        self.assertFalse(is_leap(2023))
    def test_leap(self):
        self.assertTrue(is_leap(2024))
    def test_century(self):
        self.assertFalse(is_leap(1900))
    def test_four_hundred(self):
        self.assertTrue(is_leap(2000))
""",
        "2000 is not a leap year here",
    ),
    _t(
        "matrix_transpose",
        "matrix.py",
        """
def transpose(rows):
    if not rows:
        return []
    return [[row[i] for row in rows] for i in range(len(rows[0]))]
""",
        ("range(len(rows[0]))", "range(len(rows))"),
        """
import unittest
from matrix import transpose

class TransposeTest(unittest.TestCase):
    def test_square(self):
        self.assertEqual(transpose([[1, 2], [3, 4]]), [[1, 3], [2, 4]])
    def test_wide(self):
        self.assertEqual(transpose([[1, 2, 3]]), [[1], [2], [3]])
    def test_empty(self):
        self.assertEqual(transpose([]), [])
""",
        "non-square matrices lose columns",
    ),
    _t(
        "inventory",
        "inventory.py",
        """
class Inventory:
    def __init__(self):
        self.counts = {}

    def add(self, item, n=1):
        self.counts[item] = self.counts.get(item, 0) + n

    def remove(self, item, n=1):
        have = self.counts.get(item, 0)
        if n > have:
            raise KeyError(item)
        if n == have:
            del self.counts[item]
        else:
            self.counts[item] = have - n
""",
        ("            self.counts[item] = have - n", "            self.counts[item] = n - have"),
        """
import unittest
from inventory import Inventory

class InventoryTest(unittest.TestCase):
    def test_add(self):
        inv = Inventory()
        inv.add("apple", 3)
        self.assertEqual(inv.counts, {"apple": 3})
    def test_remove_some(self):
        inv = Inventory()
        inv.add("apple", 5)
        inv.remove("apple", 2)
        self.assertEqual(inv.counts["apple"], 3)
    def test_remove_all(self):
        inv = Inventory()
        inv.add("pear")
        inv.remove("pear")
        self.assertEqual(inv.counts, {})
""",
        "removing part of a stock gives a negative count",
    ),
    _t(
        "rle",
        "compress.py",
        """
def rle(text):
    \"\"\"Run-length encoding: 'aaab' -> 'a3b1'.\"\"\"
    if not text:
        return ""
    out = []
    current, count = text[0], 1
    for ch in text[1:]:
        if ch == current:
            count += 1
        else:
            out.append(f"{current}{count}")
            current, count = ch, 1
    out.append(f"{current}{count}")
    return "".join(out)
""",
        ('    out.append(f"{current}{count}")\n    return', "    return"),
        """
import unittest
from compress import rle

class RleTest(unittest.TestCase):
    def test_runs(self):
        self.assertEqual(rle("aaab"), "a3b1")
    def test_single(self):
        self.assertEqual(rle("z"), "z1")
    def test_empty(self):
        self.assertEqual(rle(""), "")
""",
        "the last run is missing",
    ),
    _t(
        "anagram",
        "anagrams.py",
        """
def is_anagram(a, b):
    \"\"\"Same letters, ignoring case and spaces.\"\"\"
    def letters(text):
        return sorted(ch.lower() for ch in text if ch != " ")
    return letters(a) == letters(b)
""",
        ("return letters(a) == letters(b)", "return set(letters(a)) == set(letters(b))"),
        """
import unittest
from anagrams import is_anagram

class AnagramTest(unittest.TestCase):
    def test_yes(self):
        self.assertTrue(is_anagram("Listen", "Silent"))
    def test_no(self):
        self.assertFalse(is_anagram("abc", "abd"))
    def test_counts_matter(self):
        self.assertFalse(is_anagram("aab", "abb"))
""",
        "'aab' and 'abb' count as anagrams",
    ),
    _t(
        "percent",
        "money.py",
        """
def apply_discount(price, percent):
    \"\"\"price reduced by percent (0-100), rounded to cents.\"\"\"
    if not 0 <= percent <= 100:
        raise ValueError("percent must be within 0 and 100")
    return round(price * (100 - percent) / 100, 2)
""",
        ("price * (100 - percent) / 100", "price * percent / 100"),
        """
import unittest
from money import apply_discount

class DiscountTest(unittest.TestCase):
    def test_quarter(self):
        self.assertEqual(apply_discount(80, 25), 60)
    def test_half(self):
        self.assertEqual(apply_discount(10, 50), 5)
    def test_bad(self):
        with self.assertRaises(ValueError):
            apply_discount(10, 150)
""",
        "a 25% discount charges 25%",
    ),
    _t(
        "queue_two_stacks",
        "fifo.py",
        """
class Queue:
    def __init__(self):
        self._in, self._out = [], []

    def put(self, item):
        self._in.append(item)

    def get(self):
        if not self._out:
            while self._in:
                self._out.append(self._in.pop())
        if not self._out:
            raise IndexError("get from an empty queue")
        return self._out.pop()
""",
        (
            "            while self._in:\n                self._out.append(self._in.pop())",
            "            self._out.extend(self._in)\n            self._in.clear()",
        ),
        """
import unittest
from fifo import Queue

class QueueTest(unittest.TestCase):
    def test_fifo(self):
        q = Queue()
        q.put(1)
        q.put(2)
        self.assertEqual(q.get(), 1)
    def test_single(self):
        q = Queue()
        q.put("x")
        self.assertEqual(q.get(), "x")
    def test_empty(self):
        with self.assertRaises(IndexError):
            Queue().get()
""",
        "the queue hands out the newest item first",
    ),
)
