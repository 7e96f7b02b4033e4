// Package mps supervises NVIDIA MPS control daemons and is gpupool's only os/exec of
// nvidia-cuda-mps-control.
//
// One daemon runs per GPU, or per MIG instance, named by its UUID, each with its own pipe and log
// directories (CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY) and CUDA_VISIBLE_DEVICES set to
// the UUID. The supervisor runs the daemon in the foreground (-f), so it is the daemon's parent and
// sees it exit; the daemon's output, which in the foreground is its control log, is copied to
// control.log in the log directory and parsed: "Starting new server N", "Server N exited with
// status S".
//
// Limits come from the Plan: the default active thread percentage (the SM share) and the default
// pinned device memory limit, set through the control pipe with set_default_active_thread_percentage
// and set_default_device_pinned_mem_limit, then read back. MPS applies limits to clients that
// connect after they are set, so they are applied before the daemon is reported ready, and again
// after every restart.
//
// A daemon that exits (crash, kill) is restarted with exponential backoff (100 ms doubling to
// 2 s, back to 100 ms after 10 s of running); the restart is reported with the MPS servers (and so the
// clients) that ran under the dead daemon, since a dead MPS server takes every client on it along.
// Health is a get_server_list through the control pipe with a timeout. Stop sends quit, and kills
// the daemon if it has not exited within the stop timeout.
//
// A daemon outlives its supervisor's process when that is SIGKILLed (the agent's), and so do its
// clients. Its process id is kept in daemon.pid beside pipe/ and log/, and a supervisor started
// again takes over the daemon that file names when it is alive, runs the control executable and
// serves this pipe directory (an "adopted" event): limits applied again, exit seen by polling,
// its servers not followed. A new daemon on that pipe directory would refuse to start.
//
// Without a GPU the control daemon still runs and answers the control pipe; only servers (and so
// clients) need a GPU. The tests run against the real daemon (Debian's nvidia-cuda-mps);
// scripts/install-test-components.sh installs it.
package mps
