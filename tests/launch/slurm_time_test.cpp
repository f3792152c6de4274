// Slurm's time notation as seconds (sbatch --time, squeue's time left), and no time left
// outside a job.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>

#include "launch/slurm_script.h"
#include "launch/slurm_time.h"

using gpulab::launch::parse_slurm_duration;

TEST(SlurmTime, EveryFormOfSbatch) {
  EXPECT_EQ(parse_slurm_duration("90"), 5400.0);        // minutes
  EXPECT_EQ(parse_slurm_duration("05:30"), 330.0);      // minutes:seconds
  EXPECT_EQ(parse_slurm_duration("02:00:00"), 7200.0);  // hours:minutes:seconds
  EXPECT_EQ(parse_slurm_duration("1-00"), 86400.0);     // days-hours
  EXPECT_EQ(parse_slurm_duration("1-02:03"), 93780.0);  // days-hours:minutes
  EXPECT_EQ(parse_slurm_duration("2-00:00:30"), 172830.0);
  EXPECT_TRUE(std::isinf(*parse_slurm_duration("UNLIMITED")));
  for (const char* bad : {"", "soon", "1:2", "-1", "1-", "10:00:00:00", "1h", "NOT_SET"})
    EXPECT_FALSE(parse_slurm_duration(bad).has_value()) << bad;
}

TEST(SlurmTime, NoJobNoTimeLeft) {
  ::unsetenv("SLURM_JOB_ID");
  EXPECT_FALSE(gpulab::launch::slurm_job_seconds_left().has_value());
}
