// The fault suite's checker (fault_records.hpp) on made-up records: every verdict it can give,
// so that a passing suite means the checker looked, not that it cannot fail.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fault_records.hpp"

namespace dlock::fault {
namespace {

hold make_hold(int worker, std::int64_t acquired, std::int64_t released, std::uint64_t token,
               int write = 1, std::int64_t lost = 0) {
  hold h;
  h.worker = worker;
  h.acquired = acquired;
  h.released = released;
  h.token = token;
  h.write = write;
  h.lost = lost;
  return h;
}

TEST(FaultChecker, DisjointHoldsInTokenOrderPass) {
  const std::vector<hold> holds = {make_hold(0, 10, 20, 1), make_hold(1, 21, 30, 2),
                                   make_hold(0, 31, 40, 3)};
  const std::vector<accepted_write> accepted = {{1, 0, 10}, {2, 1, 21}, {3, 0, 31}};
  const check_result r = check(holds, accepted, {}, 0);
  EXPECT_EQ(r.acquisitions, 3U);
  EXPECT_EQ(r.overlaps, 0U);
  EXPECT_EQ(r.writes_accepted, 3U);
  EXPECT_FALSE(r.violation());
}

TEST(FaultChecker, OverlapNobodyWasToldOfIsAViolation) {
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1), make_hold(1, 20, 40, 2)};
  const check_result r = check(holds, {{1, 0, 10}, {2, 1, 20}}, {}, 0);
  EXPECT_EQ(r.overlaps, 1U);
  EXPECT_EQ(r.overlaps_unreported, 1U);
  EXPECT_EQ(r.max_overlap_ns, 10);
  EXPECT_TRUE(r.violation());
  ASSERT_FALSE(r.examples.empty());
}

TEST(FaultChecker, HoldsThatTouchDoNotOverlap) {
  const check_result r =
      check({make_hold(0, 10, 20, 1), make_hold(1, 20, 30, 2)}, {{1, 0, 10}, {2, 1, 20}}, {}, 0);
  EXPECT_EQ(r.overlaps, 0U);
}

TEST(FaultChecker, HolderToldOfItsLossBeforeTheNextHoldDoesNotOverlap) {
  // Worker 0 was told at 15 and went on to release at 30: it believed its hold until 15.
  const check_result r =
      check({make_hold(0, 10, 30, 1, 0, 15), make_hold(1, 20, 40, 2)}, {{2, 1, 20}}, {}, 0);
  EXPECT_EQ(r.overlaps, 0U);
  EXPECT_EQ(r.holds_lost, 1U);
  EXPECT_EQ(r.writes_refused, 1U);
  EXPECT_FALSE(r.violation());
}

TEST(FaultChecker, HolderToldLateCountsAsReportedNotAViolation) {
  // Paused: told of its loss at 25, after the next hold began at 20.
  const check_result r =
      check({make_hold(0, 10, 30, 1, 0, 25), make_hold(1, 20, 40, 2)}, {{2, 1, 20}}, {}, 0);
  EXPECT_EQ(r.overlaps, 1U);
  EXPECT_EQ(r.overlaps_reported, 1U);
  EXPECT_EQ(r.overlaps_unreported, 0U);
  EXPECT_EQ(r.max_told_late_ns, 5);
  EXPECT_EQ(r.holds_lost_after_work, 0U);
  // Told at 35, after its unlock() call at 30: it did all its work unaware.
  EXPECT_EQ(check({make_hold(0, 10, 30, 1, 0, 35), make_hold(1, 20, 40, 2)}, {}, {}, 0)
                .holds_lost_after_work,
            1U);
  EXPECT_FALSE(r.violation());
  // No fault explains it...
  EXPECT_EQ(r.overlaps_reported_unexplained, 1U);
  // ... unless worker 0 was stopped meanwhile; a pause of another worker explains nothing.
  fault_event pause;
  pause.kind = "pause";
  pause.worker = 1;
  pause.start = 12;
  pause.end = 24;
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1, 0, 25), make_hold(1, 20, 40, 2)};
  EXPECT_EQ(check(holds, {}, {pause}, 0).overlaps_reported_unexplained, 1U);
  pause.worker = 0;
  EXPECT_EQ(check(holds, {}, {pause}, 0).overlaps_reported_unexplained, 0U);
}

TEST(FaultChecker, LaterHolderToldOfItsLossCountsAsReported) {
  // Worker 1 took the lock on the server at 5, was stopped before it recorded the time, and
  // recorded 20 after it resumed; it was told at 22.
  hold paused = make_hold(1, 20, 40, 1, 0, 22);
  paused.previous = 4;
  const std::vector<hold> holds = {make_hold(0, 10, 30, 2), paused};
  const check_result r = check(holds, {{2, 0, 10}}, {}, 0);
  EXPECT_EQ(r.overlaps_reported, 1U);
  EXPECT_EQ(r.overlaps_unreported, 0U);
  EXPECT_EQ(r.overlaps_reported_unexplained, 1U);
  fault_event pause;
  pause.kind = "pause";
  pause.worker = 1;
  pause.start = 6;
  pause.end = 19;
  EXPECT_EQ(check(holds, {}, {pause}, 0).overlaps_reported_unexplained, 0U);
}

TEST(FaultChecker, UnreportedOverlapAfterAForgettingRestartIsExpected) {
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1), make_hold(1, 20, 40, 2)};
  fault_event restart;
  restart.kind = "restart";
  restart.start = 15;
  restart.end = 18;
  restart.forgets = true;
  EXPECT_EQ(check(holds, {}, {restart}, 0).overlaps_forgotten, 1U);
  EXPECT_FALSE(check(holds, {}, {restart}, 0).violation());
  // A restart that keeps every acknowledged write (appendfsync always) explains nothing.
  restart.forgets = false;
  EXPECT_EQ(check(holds, {}, {restart}, 0).overlaps_unreported, 1U);
  // Nor does one outside the two acquisitions.
  restart.forgets = true;
  restart.start = 25;
  EXPECT_EQ(check(holds, {}, {restart}, 0).overlaps_unreported, 1U);
}

TEST(FaultChecker, UnreportedOverlapOfAStalledHolderIsCountedApartAndFailsWhenStrict) {
  // Worker 0 was stopped from 12 to 28 while it held, and released at 30 without being told.
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1), make_hold(1, 20, 25, 2)};
  fault_event pause;
  pause.kind = "pause";
  pause.worker = 0;
  pause.start = 12;
  pause.end = 28;
  const check_result r = check(holds, {}, {pause}, 0);
  EXPECT_EQ(r.overlaps_unreported_stalled, 1U);
  EXPECT_EQ(r.overlaps_unreported, 0U);
  EXPECT_FALSE(r.violation());
  EXPECT_TRUE(check(holds, {}, {pause}, 0, /*strict=*/true).violation());
  // A stop of a third worker explains nothing.
  pause.worker = 2;
  EXPECT_EQ(check(holds, {}, {pause}, 0).overlaps_unreported, 1U);
}

TEST(FaultChecker, ATokenGrantedAcrossAStallIsCountedApartAndFailsWhenStrict) {
  // Worker 1 was granted token 4 before it was stopped (5 to 19), recorded it at 21, and was
  // never told; token 5 was taken and released meanwhile.
  hold stalled = make_hold(1, 21, 30, 4);
  stalled.previous = 4;
  const std::vector<hold> holds = {make_hold(0, 10, 20, 5), stalled};
  fault_event pause;
  pause.kind = "pause";
  pause.worker = 1;
  pause.start = 5;
  pause.end = 19;
  const check_result r = check(holds, {}, {pause}, 0);
  EXPECT_EQ(r.tokens_not_increasing_stalled, 1U);
  EXPECT_EQ(r.tokens_not_increasing, 0U);
  EXPECT_FALSE(r.violation());
  EXPECT_TRUE(check(holds, {}, {pause}, 0, true).violation());
}

TEST(FaultChecker, AcceptedWritesOutOfTokenOrderAreAViolation) {
  const std::vector<hold> holds = {make_hold(0, 10, 20, 1), make_hold(1, 21, 30, 2)};
  const check_result r = check(holds, {{2, 1, 21}, {1, 0, 10}}, {}, 0);
  EXPECT_EQ(r.fenced_out_of_order, 1U);
  EXPECT_TRUE(r.violation());
  // A repeated token is out of order too: the resource accepts only higher ones.
  EXPECT_EQ(check(holds, {{1, 0, 10}, {1, 0, 10}}, {}, 0).fenced_out_of_order, 1U);
}

TEST(FaultChecker, ATokenLowerThanAnEarlierHoldsIsAViolation) {
  const std::vector<hold> holds = {make_hold(0, 10, 20, 5), make_hold(1, 21, 30, 4, 0)};
  const check_result r = check(holds, {{5, 0, 10}}, {}, 0);
  EXPECT_EQ(r.tokens_not_increasing, 1U);
  EXPECT_TRUE(r.violation());
  // The same token again is not an increase either.
  EXPECT_EQ(
      check({make_hold(0, 10, 20, 5), make_hold(1, 21, 30, 5)}, {}, {}, 0).tokens_not_increasing,
      1U);
  // A hold that was told of its loss is not held to it (its worker may have stopped between the
  // server's grant and the record).
  EXPECT_EQ(check({make_hold(0, 10, 20, 5), make_hold(1, 21, 30, 4, 0, 25)}, {}, {}, 0)
                .tokens_not_increasing,
            0U);
}

TEST(FaultChecker, AcceptedWriteOfNoRecordedHoldIsAViolation) {
  const check_result r = check({make_hold(0, 10, 20, 1)}, {{1, 0, 10}, {7, 3, 50}}, {}, 0);
  EXPECT_EQ(r.accepted_unknown, 1U);
  EXPECT_TRUE(r.violation());
}

TEST(FaultChecker, ReadsRecordFilesAndEndsAKilledHoldAtTheKill) {
  const std::string path = testing::TempDir() + "fault-records-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << "W 0 0 123 abc\n"
        << "A 100 5\n"
        << "R 100 200 0 5 1 0\n"
        << "E 250 connection lost\n"
        << "A 300 6\n"
        << "R 300 400 350 6 0 12\n"
        << "A 500 7\n";  // killed while holding
  }
  std::vector<hold> holds;
  std::uint64_t errors = 0;
  ASSERT_TRUE(read_worker_file({0, 0, 600, path}, holds, errors));
  std::filesystem::remove(path);
  ASSERT_EQ(holds.size(), 3U);
  EXPECT_EQ(errors, 1U);
  EXPECT_EQ(holds[0].believed_end(), 200);
  EXPECT_EQ(holds[1].believed_end(), 350);
  EXPECT_EQ(holds[1].unlock, 12);
  EXPECT_EQ(holds[0].previous, 0);
  EXPECT_EQ(holds[1].previous, 250);  // the E line before it
  EXPECT_EQ(holds[2].previous, 400);
  EXPECT_EQ(holds[2].killed, 600);
  EXPECT_EQ(holds[2].believed_end(), 600);
  // A hold of another worker that starts before the kill overlaps the killed one.
  holds.push_back(make_hold(1, 550, 700, 8));
  const check_result r = check(holds, {}, {}, errors);
  EXPECT_EQ(r.holds_killed, 1U);
  EXPECT_EQ(r.holds_lost, 1U);
  EXPECT_EQ(r.holds_lost_after_work, 0U);  // told at 350, before its unlock() at 400
  EXPECT_EQ(r.overlaps_unreported, 1U);
  EXPECT_FALSE(read_worker_file({0, 0, 0, path}, holds, errors));
}

fault_event make_partition(int worker, std::int64_t start, std::int64_t end, std::int64_t tell_by) {
  fault_event f;
  f.kind = "partition";
  f.worker = worker;
  f.start = start;
  f.end = end;
  f.on_holder = tell_by != 0;
  f.tell_by = tell_by;
  return f;
}

TEST(FaultChecker, PartitionedHolderToldByItsDeadlinePasses) {
  // Worker 0 cut off at 15, told at 40 (due by 50); worker 1 took the lock at 60.
  const std::vector<hold> holds = {make_hold(0, 10, 70, 1, -1, 40), make_hold(1, 60, 80, 2)};
  const check_result r = check(holds, {{2, 1, 60}}, {make_partition(0, 15, 100, 50)}, 0);
  EXPECT_EQ(r.partition_holds, 1U);
  EXPECT_EQ(r.partition_holds_told, 1U);
  EXPECT_EQ(r.partition_told_late, 0U);
  EXPECT_EQ(r.overlaps, 0U);
  EXPECT_FALSE(r.violation());
}

TEST(FaultChecker, PartitionedHolderToldAfterItsDeadlineIsAViolation) {
  const std::vector<hold> holds = {make_hold(0, 10, 70, 1, -1, 55)};
  const check_result r = check(holds, {}, {make_partition(0, 15, 100, 50)}, 0);
  EXPECT_EQ(r.partition_told_late, 1U);
  EXPECT_TRUE(r.violation());
  ASSERT_FALSE(r.examples.empty());
  // Never told, still working at its deadline: the same.
  EXPECT_EQ(
      check({make_hold(0, 10, 70, 1)}, {}, {make_partition(0, 15, 100, 50)}, 0).partition_told_late,
      1U);
  // Never told, but it had released before its deadline by itself: in time.
  EXPECT_EQ(
      check({make_hold(0, 10, 30, 1)}, {}, {make_partition(0, 15, 100, 50)}, 0).partition_told_late,
      0U);
}

TEST(FaultChecker, HoldThatEndedBeforeTheCutIsNotAPartitionedHold) {
  // The lock passed between the driver's look and the cut: worker 0 had released at 12.
  const check_result r = check({make_hold(0, 10, 12, 1)}, {}, {make_partition(0, 15, 100, 50)}, 0);
  EXPECT_EQ(r.partition_holds, 0U);
  EXPECT_FALSE(r.violation());
  // A partition of a worker that did not hold (tell_by 0) checks nothing.
  EXPECT_EQ(
      check({make_hold(0, 10, 70, 1)}, {}, {make_partition(0, 15, 100, 0)}, 0).partition_holds, 0U);
}

TEST(FaultChecker, OverlapWithAPartitionedHolderToldLateIsAViolation) {
  // Worker 0, cut off at 15, was told only at 65, after worker 1 took the lock at 60.
  const std::vector<hold> holds = {make_hold(0, 10, 70, 1, -1, 65), make_hold(1, 60, 80, 2)};
  const check_result r = check(holds, {}, {make_partition(0, 15, 100, 0)}, 0);
  EXPECT_EQ(r.overlaps_reported, 1U);
  EXPECT_EQ(r.overlaps_reported_partitioned, 1U);
  EXPECT_EQ(r.overlaps_reported_unexplained, 0U);
  EXPECT_TRUE(r.violation());
  // Stopped meanwhile too: the pause explains it.
  fault_event pause;
  pause.kind = "pause";
  pause.worker = 0;
  pause.start = 20;
  pause.end = 64;
  EXPECT_EQ(
      check(holds, {}, {make_partition(0, 15, 100, 0), pause}, 0).overlaps_reported_partitioned,
      0U);
}

// A kill -9 of the lock's master at `start`; the holds it granted are due to end by `tell_by`;
// its replica was seen still a replica at `replica_until`.
fault_event make_master_kill(std::int64_t start, std::int64_t tell_by, std::int64_t replica_until) {
  fault_event f;
  f.kind = "master-kill";
  f.start = start;
  f.end = replica_until + 100;
  f.tell_by = tell_by;
  f.replica_until = replica_until;
  return f;
}

TEST(FaultChecker, HolderOfAKilledMasterToldByItsDeadlinePasses) {
  // Master killed at 15; worker 0 told at 40 (due by 50); the replica served from after 60, where
  // worker 1 took the lock at 80.
  const std::vector<hold> holds = {make_hold(0, 10, 70, 1, -1, 40), make_hold(1, 80, 90, 2)};
  const check_result r = check(holds, {{2, 1, 80}}, {make_master_kill(15, 50, 60)}, 0);
  EXPECT_EQ(r.failover_holds, 1U);
  EXPECT_EQ(r.failover_holds_told, 1U);
  EXPECT_EQ(r.failover_told_late, 0U);
  EXPECT_EQ(r.failovers_unchecked, 0U);
  EXPECT_EQ(r.overlaps, 0U);
  EXPECT_FALSE(r.violation());
  // Released by itself before its deadline, never told: in time too.
  EXPECT_EQ(
      check({make_hold(0, 10, 30, 1)}, {}, {make_master_kill(15, 50, 60)}, 0).failover_told_late,
      0U);
  // A hold that ended before the kill, and one granted by the promoted replica, are not checked.
  EXPECT_EQ(check({make_hold(0, 5, 12, 1), make_hold(1, 61, 99, 2)}, {},
                  {make_master_kill(15, 50, 60)}, 0)
                .failover_holds,
            0U);
}

TEST(FaultChecker, HolderOfAKilledMasterNotToldByItsDeadlineIsAViolation) {
  // Never told, still working after its deadline.
  check_result r = check({make_hold(0, 10, 70, 1)}, {}, {make_master_kill(15, 50, 60)}, 0);
  EXPECT_EQ(r.failover_told_late, 1U);
  EXPECT_TRUE(r.violation());
  ASSERT_FALSE(r.examples.empty());
  // Told, but late.
  EXPECT_EQ(check({make_hold(0, 10, 70, 1, -1, 55)}, {}, {make_master_kill(15, 50, 60)}, 0)
                .failover_told_late,
            1U);
  // Recorded after the kill (the dead master's reply was on its way) and never told: the same.
  r = check({make_hold(0, 20, 70, 1)}, {}, {make_master_kill(15, 50, 60)}, 0);
  EXPECT_EQ(r.failover_holds, 1U);
  EXPECT_EQ(r.failover_told_late, 1U);
}

TEST(FaultChecker, AKillOfAnUnreplicatedMasterIsAHardFailoverToo) {
  fault_event k = make_master_kill(15, 50, 60);
  k.kind = "master-kill-unreplicated";
  EXPECT_EQ(check({make_hold(0, 10, 70, 1)}, {}, {k}, 0).failover_told_late, 1U);
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1), make_hold(1, 20, 40, 2)};
  fault_event early = make_master_kill(15, 50, 17);
  early.kind = "master-kill-unreplicated";
  EXPECT_EQ(check(holds, {}, {early}, 0).overlaps_failover_forgotten, 1U);
  early.kind = "failover";  // graceful: nothing is lost, nothing excused
  EXPECT_EQ(check(holds, {}, {early}, 0).overlaps_unreported, 1U);
}

TEST(FaultChecker, AReplicaPromotedBeforeTheDeadlineLeavesTheFailoverUnchecked) {
  // The replica may have had the hold and renewed it: a hold kept past the deadline is legitimate.
  const check_result r = check({make_hold(0, 10, 70, 1)}, {}, {make_master_kill(15, 50, 40)}, 0);
  EXPECT_EQ(r.failovers_unchecked, 1U);
  EXPECT_EQ(r.failover_holds, 0U);
  EXPECT_FALSE(r.violation());
}

TEST(FaultChecker, UnreportedOverlapAcrossAHardFailoverIsExpectedIfTheHolderEndedInTime) {
  // The replica, promoted early (at 18), lacked worker 0's hold: worker 1 took the lock at 20;
  // worker 0 released at 30, before its deadline, never told.
  const std::vector<hold> holds = {make_hold(0, 10, 30, 1), make_hold(1, 20, 40, 2)};
  check_result r = check(holds, {}, {make_master_kill(15, 50, 17)}, 0);
  EXPECT_EQ(r.overlaps_failover_forgotten, 1U);
  EXPECT_EQ(r.overlaps_unreported, 0U);
  EXPECT_FALSE(r.violation());
  // Still believing after its deadline (60 > 50) without being told: a holder not told.
  r = check({make_hold(0, 10, 60, 1), make_hold(1, 20, 70, 2)}, {}, {make_master_kill(15, 50, 17)},
            0);
  EXPECT_EQ(r.overlaps_failover_forgotten, 0U);
  EXPECT_EQ(r.overlaps_unreported, 1U);
  EXPECT_TRUE(r.violation());
  // A kill after both acquisitions explains nothing.
  r = check(holds, {}, {make_master_kill(25, 60, 27)}, 0);
  EXPECT_EQ(r.overlaps_unreported, 1U);
  // A reported overlap across a hard failover is explained by it.
  r = check({make_hold(0, 10, 30, 1, 1, 25), make_hold(1, 20, 40, 2)}, {},
            {make_master_kill(15, 50, 17)}, 0);
  EXPECT_EQ(r.overlaps_reported, 1U);
  EXPECT_EQ(r.overlaps_reported_unexplained, 0U);
}

TEST(FaultChecker, CountsHandOvers) {
  const check_result r = check({make_hold(0, 10, 20, 1), make_hold(0, 21, 30, 2),
                                make_hold(1, 31, 40, 3), make_hold(0, 41, 50, 4)},
                               {}, {}, 0);
  EXPECT_EQ(r.handoffs, 2U);
}

// A worker killed after it said it releases (U) and before its R line: the lock may be free at
// once (the unlocking thread writes the release itself), so its hold ended at U, not at the kill.
TEST(FaultChecker, AHolderKilledBetweenItsReleaseAndItsRecordEndedAtTheRelease) {
  const std::string path = testing::TempDir() + "fault-u-records-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << "W 1 0 123 client\n"
        << "A 100 5\n"
        << "U 100 200\n"
        << "R 100 200 0 5 1 0\n"
        << "A 300 6\n"
        << "U 300 400\n";  // killed at 450, before the R line
  }
  std::vector<hold> holds;
  std::uint64_t errors = 0;
  dlock::fault::worker_file file{1, 0, 450, path, false};
  ASSERT_TRUE(read_worker_file(file, holds, errors));
  std::filesystem::remove(path);
  ASSERT_EQ(holds.size(), 2U);
  EXPECT_EQ(holds[0].believed_end(), 200);
  EXPECT_EQ(holds[0].write, 1);  // the R line still completes a hold its U line ended
  EXPECT_EQ(holds[1].believed_end(), 400);
  EXPECT_EQ(holds[1].killed, 0);
  // Another worker took the lock between the release and the kill: no overlap.
  hold next;
  next.worker = 2;
  next.acquired = 420;
  next.released = 500;
  next.token = 7;
  holds.push_back(next);
  const check_result r = check(holds, {}, {}, errors);
  EXPECT_EQ(r.overlaps, 0U);
}

TEST(FaultChecker, ReadsTheRecordsOfADlockExecWorker) {
  const std::string path = testing::TempDir() + "fault-cli-records-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << "W 4 0 123 cli\n"
        << "A 100 5\n"  // a hold that ended normally
        << "R 100 200 0 5 1 0\n"
        << "X 100 210 0\n"
        << "A 300 6\n"  // dlock reported the loss after the command had finished
        << "R 300 400 0 6 0 0\n"
        << "X 300 420 70\n"
        << "A 500 7\n"  // dlock was killed: its guard killed the command
        << "X 500 530 137\n"
        << "A 600 8\n"  // dlock was killed before the command said it runs
        << "X 0 640 137\n"
        << "X 0 700 69\n"  // a failure of dlock with no hold open: ends nothing
        << "A 800 9\n"     // the command outlived the kill grace and was killed by dlock
        << "X 800 900 70\n";
  }
  std::vector<hold> holds;
  std::uint64_t errors = 0;
  dlock::fault::worker_file file{4, 0, 0, path, true};
  ASSERT_TRUE(read_worker_file(file, holds, errors));
  std::filesystem::remove(path);
  ASSERT_EQ(holds.size(), 5U);
  EXPECT_TRUE(holds[0].cli);
  EXPECT_EQ(holds[0].believed_end(), 200);
  EXPECT_EQ(holds[0].lost, 0);
  EXPECT_EQ(holds[1].lost, 420);  // told after its work
  EXPECT_EQ(holds[1].believed_end(), 400);
  EXPECT_EQ(holds[1].unlock, 70);
  EXPECT_EQ(holds[2].killed, 530);
  EXPECT_EQ(holds[2].released, 0);
  EXPECT_EQ(holds[3].killed, 640);
  EXPECT_EQ(holds[4].released, 900);
  EXPECT_EQ(holds[4].lost, 900);
  const check_result r = check(holds, {}, {}, errors);
  EXPECT_EQ(r.acquisitions_cli, 5U);
  EXPECT_EQ(r.holds_killed, 2U);
  EXPECT_EQ(r.holds_lost_after_work, 1U);
}

}  // namespace
}  // namespace dlock::fault
