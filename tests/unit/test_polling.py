"""The one poll loop: how often it asks, when it stops, what it returns."""

from flashfleet.polling import poll


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.asked: list[float] = []

    def sleep(self, s: float) -> None:
        self.now += s

    def attempt(self, good_from: float) -> bool:
        self.asked.append(self.now)
        return self.now >= good_from


def test_stops_at_the_first_good_answer() -> None:
    c = Clock()
    assert poll(lambda: c.attempt(20), bool, timeout_s=60, interval_s=10, clock=lambda: c.now, sleep=c.sleep)
    assert c.asked == [0, 10, 20]


def test_no_attempt_starts_after_the_timeout() -> None:
    c = Clock()
    answer = poll(
        lambda: c.attempt(99), bool, timeout_s=25, interval_s=10, clock=lambda: c.now, sleep=c.sleep
    )
    assert answer is False
    assert c.asked == [0, 10, 20]  # 30 would be past 25 s


def test_an_attempt_exactly_at_the_timeout_is_made() -> None:
    c = Clock()
    poll(lambda: c.attempt(99), bool, timeout_s=20, interval_s=10, clock=lambda: c.now, sleep=c.sleep)
    assert c.asked == [0, 10, 20]


def test_a_zero_timeout_asks_once_and_returns_the_answer() -> None:
    c = Clock()
    assert poll(lambda: ["n0"], lambda left: not left, timeout_s=0, interval_s=5, sleep=c.sleep) == ["n0"]
    assert c.now == 0
