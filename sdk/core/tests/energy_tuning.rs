//! Energy tuning on the five simulated phones of MNN-AECS, and the topology reader on their
//! sysfs/procfs trees. The tuner sees only the topology and noisy probes; an exhaustive search
//! over every selection, on the noise-free device model, says what it should find.

use std::path::{Path, PathBuf};

use tern::energy::simulator::{SimDevice, SimProbe};
use tern::energy::store;
use tern::energy::tuner::{exhaustive, Tuner, TunerOptions};
use tern::runtime::{CoreSelection, CpuTopology};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/topology").join(name)
}

#[test]
fn fixture_trees_give_the_simulated_topologies() {
    for device in SimDevice::all() {
        let read = CpuTopology::read(&fixture(device.id)).expect("fixture topology");
        assert_eq!(read, device.topology(), "{}", device.id);
    }
    let k9000 = CpuTopology::read(&fixture("kirin9000")).expect("kirin9000");
    assert_eq!(k9000.describe(), "1×Cortex-A77@3.13GHz + 3×Cortex-A77@2.54GHz + 4×Cortex-A55@2.05GHz");
    assert_eq!(k9000.big_cores(), vec![4, 5, 6, 7]);
    let elite = CpuTopology::read(&fixture("sd8elite")).expect("sd8elite");
    assert!(elite.clusters.iter().all(|c| !c.efficiency), "both Oryon clusters are performance cores");
    let gen3 = CpuTopology::read(&fixture("sd8gen3")).expect("sd8gen3");
    let sizes: Vec<usize> = gen3.clusters.iter().map(|c| c.cores.len()).collect();
    assert_eq!(sizes, vec![1, 3, 2, 2]);
    assert!(gen3.clusters[3].efficiency && !gen3.clusters[2].efficiency);
}

#[test]
fn this_machines_tree() {
    let t = CpuTopology::read(&fixture("this-machine")).expect("this machine");
    assert_eq!(t.n_cores(), 2);
    assert_eq!(t.clusters.len(), 1, "two identical cores and no cpufreq: one cluster");
    assert_eq!(t.soc, "AMD EPYC");
    assert_eq!(t.big_cores(), vec![0, 1]);
}

#[test]
fn unreadable_trees_are_typed_errors() {
    let missing = Path::new("/nonexistent/tern-topology");
    assert!(matches!(CpuTopology::read(missing), Err(tern::Error::Topology(_))));
    let dir = std::env::temp_dir().join(format!("tern-topo-bad-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sys/devices/system/cpu")).expect("mkdir");
    std::fs::write(dir.join("sys/devices/system/cpu/online"), "0-99999999").expect("write");
    assert!(CpuTopology::read(&dir).is_err(), "an absurd CPU list is refused, not allocated");
    std::fs::write(dir.join("sys/devices/system/cpu/online"), "0-1").expect("write");
    std::fs::create_dir_all(dir.join("sys/devices/system/cpu/cpu0")).expect("mkdir");
    std::fs::write(dir.join("sys/devices/system/cpu/cpu0/cpu_capacity"), "not a number").expect("write");
    let t = CpuTopology::read(&dir).expect("missing and malformed values fall back");
    assert_eq!(t.n_cores(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The acceptance test: on every phone and under many noise draws the tuner finds the
/// exhaustive optimum with at most 9 probes, ≥ 20% below the big cores' energy per token at
/// ≤ 8% slowdown.
#[test]
fn tuner_finds_the_exhaustive_optimum_on_every_phone() {
    let opts = TunerOptions::default();
    for device in SimDevice::all() {
        let topo = device.topology();
        let best =
            exhaustive(&topo, &mut SimProbe::exact(device.clone()), opts.max_slowdown, true).expect("exhaustive");
        let big = device.truth_of(&device.big_cores());
        let max_speed = best.max_tokens_per_s;
        for seed in 0..40 {
            let mut probe = SimProbe::new(device.clone(), seed);
            let mut tuner = Tuner::new(&topo, &mut probe, opts, true);
            let choice = tuner.search(opts.max_slowdown).expect("tune");
            assert_eq!(choice.selection, best.selection, "{} seed {seed}: tuner vs exhaustive", device.id);
            assert!(choice.probes <= 9, "{} seed {seed}: {} probes", device.id, choice.probes);
            assert_eq!(probe.probes, choice.probes, "every candidate is probed once");
            let truth = device.truth_of(&choice.selection);
            assert!(
                truth.joules_per_token() <= 0.8 * big.joules_per_token(),
                "{}: not 20% below the big cores",
                device.id
            );
            assert!(truth.tokens_per_s >= 0.92 * max_speed.max(big.tokens_per_s), "{}: slower than 8%", device.id);
        }
        assert!(best.evaluated >= 20, "{}: the exhaustive search tries every selection", device.id);
    }
}

/// The Mate 40 Pro: stage 1 stops at 1 big + 2 middle cores, the search settles on the 2 middle
/// cores (the paper's result), and power saver goes no faster than balanced.
#[test]
fn mate_40_pro_walkthrough() {
    let device = SimDevice::by_name("kirin9000").expect("device");
    let topo = device.topology();
    let mut probe = SimProbe::new(device.clone(), 3);
    let mut tuner = Tuner::new(&topo, &mut probe, TunerOptions::default(), true);
    let (fastest, _) = tuner.fastest().expect("stage 1");
    assert_eq!(fastest, CoreSelection::cores([4, 5, 7]), "1 big + 2 middle");
    let balanced = tuner.search(0.08).expect("balanced");
    assert_eq!(balanced.selection, CoreSelection::cores([4, 5]));
    let saver = tuner.search(0.25).expect("power saver");
    assert!(
        device.truth_of(&saver.selection).joules_per_token()
            <= device.truth_of(&balanced.selection).joules_per_token() * 1.05
    );
    // Thread counts where cores cannot be pinned (iOS): the same search over counts.
    let mut probe = SimProbe::new(device, 3);
    let mut tuner = Tuner::new(&topo, &mut probe, TunerOptions::default(), false);
    assert!(matches!(tuner.search(0.08).expect("threads").selection, CoreSelection::Threads(_)));
}

#[test]
fn tuning_is_stored_per_device_and_topology() {
    let device = SimDevice::by_name("sd8elite").expect("device");
    let topo = device.topology();
    let mut probe = SimProbe::new(device.clone(), 1);
    let mut tuner = Tuner::new(&topo, &mut probe, TunerOptions::default(), true);
    let (fastest, fastest_tokens_per_s) = tuner.fastest().expect("stage 1");
    let balanced = tuner.search(0.08).expect("balanced");
    let power_saver = tuner.search(0.25).expect("saver");
    let key = store::device_key("Xiaomi 15 Pro", &topo);
    let tuning = store::Tuning {
        version: store::Tuning::new_version(),
        key: key.clone(),
        topology: topo.describe(),
        fastest,
        fastest_tokens_per_s,
        balanced,
        power_saver,
        probes: tuner.records().to_vec(),
        seconds: 1.0,
        tuned_at: 0,
    };
    let dir = std::env::temp_dir().join(format!("tern-energy-store-{}", std::process::id()));
    let path = store::save(&dir, &tuning).expect("save");
    let loaded = store::load(&dir, &key, &topo).expect("stored tuning");
    assert_eq!(
        (&loaded.key, &loaded.fastest, &loaded.balanced.selection),
        (&key, &tuning.fastest, &tuning.balanced.selection)
    );
    assert_eq!(loaded.power_saver.selection, tuning.power_saver.selection);
    let selections = |t: &store::Tuning| t.probes.iter().map(|p| p.selection.clone()).collect::<Vec<_>>();
    assert_eq!(selections(&loaded), selections(&tuning));
    // Another phone, or the same phone with another topology, does not get it.
    assert!(store::load(&dir, "Xiaomi 15 Pro|other", &topo).is_none());
    let other = SimDevice::by_name("sd8gen3").expect("device").topology();
    assert!(store::load(&dir, &store::device_key("Xiaomi 15 Pro", &other), &other).is_none());
    // A file that parses but names cores this phone does not have (an id past any CPU set) is
    // damaged too: not tuned, and the ids never reach the OS.
    for bad in [CoreSelection::Cores(vec![99_999]), CoreSelection::Cores(Vec::new()), CoreSelection::Threads(0)] {
        let mut damaged = tuning.clone();
        damaged.balanced.selection = bad.clone();
        store::save(&dir, &damaged).expect("save");
        assert!(store::load(&dir, &key, &topo).is_none(), "{bad:?}");
    }
    // A damaged file is ignored (tuning runs again), not an error.
    std::fs::write(&path, "{ not json").expect("write");
    assert!(store::load(&dir, &key, &topo).is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writers racing on one device's file (threads of one app, or two apps) each land whole: no
/// write fails, and what is left is one of the tunings written.
#[test]
fn concurrent_saves_all_succeed() {
    let device = SimDevice::by_name("sd8gen3").expect("device");
    let topo = device.topology();
    let mut probe = SimProbe::new(device.clone(), 1);
    let mut tuner = Tuner::new(&topo, &mut probe, TunerOptions::default(), true);
    let (fastest, fastest_tokens_per_s) = tuner.fastest().expect("stage 1");
    let balanced = tuner.search(0.08).expect("balanced");
    let key = store::device_key("racing phone", &topo);
    let tuning = store::Tuning {
        version: store::Tuning::new_version(),
        key: key.clone(),
        topology: topo.describe(),
        fastest,
        fastest_tokens_per_s,
        balanced: balanced.clone(),
        power_saver: balanced,
        probes: Vec::new(),
        seconds: 1.0,
        tuned_at: 0,
    };
    let dir = std::env::temp_dir().join(format!("tern-energy-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (dir, tuning) = (&dir, &tuning);
            s.spawn(move || {
                for n in 0..200u64 {
                    let mut mine = tuning.clone();
                    mine.tuned_at = t * 1000 + n;
                    store::save(dir, &mine).expect("no save fails");
                }
            });
        }
    });
    let left = store::load(&dir, &key, &topo).expect("a whole tuning is left");
    assert!(left.tuned_at % 1000 == 199, "the last save of some writer: {}", left.tuned_at);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .expect("dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
