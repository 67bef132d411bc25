#include "cluster/router/worker_address.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

namespace ds::cluster {
namespace {

TEST(WorkerAddress, ParsesHttpHostPort) {
  auto a = parse_worker_url("http://127.0.0.1:8001/", "--worker");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8001);
  EXPECT_EQ(a->url, "http://127.0.0.1:8001");
  auto v6 = parse_worker_url("http://[::1]:9000", "--worker");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
}

TEST(WorkerAddress, RefusesWhatItCannotServe) {
  for (const char* bad : {"https://h:1", "h:1", "http://h", "http://h:0", "http://h:70000", "http://h:1/v1",
                          "http://u@h:1", "http://h:1x"}) {
    auto a = parse_worker_url(bad, "--worker");
    EXPECT_FALSE(a.ok()) << bad;
    if (!a.ok()) {
      EXPECT_NE(a.status().message().find("--worker"), std::string::npos);
    }
  }
}

TEST(WorkerAddress, ReadsAFileWithCommentsAndNamesTheBadLine) {
  const std::string path = ::testing::TempDir() + "workers_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream f(path);
    f << "# replicas\nhttp://127.0.0.1:8001\n\n  http://127.0.0.1:8002  # second\n";
  }
  auto list = read_workers_file(path);
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].port, 8002);
  {
    std::ofstream f(path, std::ios::app);
    f << "ftp://x:1\n";
  }
  auto bad = read_workers_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":5"), std::string::npos) << bad.status().message();
  std::remove(path.c_str());
}

TEST(WorkerAddress, EventsEndpointsFromTheFlagOrTheFile) {
  std::vector<WorkerAddress> workers = {*parse_worker_url("http://127.0.0.1:8001", "w"),
                                        *parse_worker_url("http://127.0.0.1:8002", "w")};
  ASSERT_TRUE(attach_worker_events(workers, "http://127.0.0.1:8002=tcp://127.0.0.1:5557").ok());
  EXPECT_EQ(workers[0].events_endpoint, "");
  EXPECT_EQ(workers[1].events_endpoint, "tcp://127.0.0.1:5557");
  ASSERT_TRUE(attach_worker_events(workers, "http://127.0.0.1:8001/=ipc:///tmp/w1").ok());
  EXPECT_EQ(workers[0].events_endpoint, "ipc:///tmp/w1");
  for (const char* bad :
       {"http://127.0.0.1:8003=tcp://127.0.0.1:1", "http://127.0.0.1:8001", "http://127.0.0.1:8001=udp://x:1",
        "http://127.0.0.1:8001=tcp://*:5557", "http://127.0.0.1:8001=tcp://h:0"})
    EXPECT_FALSE(attach_worker_events(workers, bad).ok()) << bad;
  EXPECT_NE(attach_worker_events(workers, "http://127.0.0.1:8003=tcp://h:1").message().find("not one of"),
            std::string::npos);

  const std::string path = ::testing::TempDir() + "workers_events_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream f(path);
    f << "http://127.0.0.1:8001 events=tcp://127.0.0.1:5557  # with events\nhttp://127.0.0.1:8002\n";
  }
  auto list = read_workers_file(path);
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ((*list)[0].events_endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ((*list)[1].events_endpoint, "");
  {
    std::ofstream f(path, std::ios::app);
    f << "http://127.0.0.1:8003 tcp://127.0.0.1:5558\n";
  }
  auto bad = read_workers_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":3"), std::string::npos) << bad.status().message();
  std::remove(path.c_str());
}

TEST(WorkerAddress, ReplayEndpointsFromTheFlagAndTheFile) {
  auto a = parse_worker_url("http://127.0.0.1:8001", "--worker");
  ASSERT_TRUE(a.ok());
  std::vector<WorkerAddress> workers{*a};
  const Status no_events = attach_worker_replay(workers, "http://127.0.0.1:8001=tcp://127.0.0.1:5558");
  EXPECT_NE(no_events.message().find("no --worker-events"), std::string::npos) << no_events.message();
  ASSERT_TRUE(attach_worker_events(workers, "http://127.0.0.1:8001=tcp://127.0.0.1:5557").ok());
  ASSERT_TRUE(attach_worker_replay(workers, "http://127.0.0.1:8001=tcp://127.0.0.1:5558").ok());
  EXPECT_EQ(workers[0].replay_endpoint, "tcp://127.0.0.1:5558");
  const Status not_ours = attach_worker_replay(workers, "http://127.0.0.1:8009=tcp://127.0.0.1:1");
  EXPECT_NE(not_ours.message().find("--worker-events-replay"), std::string::npos) << not_ours.message();

  const std::string path = ::testing::TempDir() + "workers_replay_" + std::to_string(getpid()) + ".txt";
  auto read_with = [&](const std::string& text) {
    std::ofstream(path) << text;
    return read_workers_file(path);
  };
  auto both = read_with("http://127.0.0.1:8001 replay=tcp://127.0.0.1:5558 events=tcp://127.0.0.1:5557\n");
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_EQ((*both)[0].events_endpoint, "tcp://127.0.0.1:5557");
  EXPECT_EQ((*both)[0].replay_endpoint, "tcp://127.0.0.1:5558");
  auto alone = read_with("http://127.0.0.1:8001 replay=tcp://127.0.0.1:5558\n");
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("needs events="), std::string::npos) << alone.status().message();
  EXPECT_FALSE(read_with("http://127.0.0.1:8001 events=tcp://h:1 events=tcp://h:2\n").ok());
  EXPECT_FALSE(read_with("http://127.0.0.1:8001 events=tcp://h:1 replay=tcp://*:2\n").ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds::cluster
