//! Energy meters behind one trait: a cumulative joule counter the engine reads at phase
//! boundaries. Every reading says whether it was measured or estimated.
//!
//! - `RaplMeter`: Linux powercap (`/sys/class/powercap/intel-rapl:N/energy_uj`), package energy.
//! - `PowerSupplySource`: a battery's `power_now`, or `current_now` × `voltage_now`, polled
//!   every 50 ms and integrated (laptops, and the Android phones that expose it).
//! - The Android `BatteryManager` meter (`super::android`), polled the same way through JNI.
//! - `EstimatedMeter`: the power heuristic integrated over time, where nothing can be read
//!   (iOS, virtual machines).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::power_model::PowerModel;
use crate::error::{Error, Result};
use crate::runtime::{CoreSelection, CpuTopology};

/// How often instantaneous power is sampled (the paper's 50 ms: Android updates every 250 ms).
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EnergyKind {
    /// Read from a hardware counter or gauge.
    Measured,
    /// Computed from the power model.
    Estimated,
}

impl std::fmt::Display for EnergyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EnergyKind::Measured => "measured",
            EnergyKind::Estimated => "estimated",
        })
    }
}

pub trait EnergyMeter: Send + Sync {
    /// What is read, e.g. `rapl`, `battery BAT0`, `estimate (power model)`.
    fn name(&self) -> &str;
    fn kind(&self) -> EnergyKind;
    /// Joules since an arbitrary origin; the difference of two readings is the energy between.
    fn total_joules(&self) -> Result<f64>;
    /// The engine now runs on `selection` (None: every core, or idle between requests).
    /// Meters that measure ignore it; the estimate needs it.
    fn note_selection(&self, _selection: Option<&CoreSelection>) {}
}

fn read_num<T: std::str::FromStr>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_owned(), source })?;
    text.trim().parse().map_err(|_| Error::Energy(format!("{} does not hold a number", path.display())))
}

/// Package energy from Linux powercap (Intel and AMD RAPL). The counters wrap at
/// `max_energy_range_uj`; readings are unwrapped here.
pub(crate) struct RaplMeter {
    zones: Vec<RaplZone>,
}

struct RaplZone {
    energy: PathBuf,
    range_uj: u64,
    /// (last raw reading, unwrapped total) in µJ.
    state: Mutex<(u64, u64)>,
}

impl RaplMeter {
    /// The top-level zones (`intel-rapl:N`, not their `:N:M` subzones) under
    /// `root/sys/class/powercap`; an error if none can be read (absent, or root-only).
    pub fn open(root: &Path) -> Result<RaplMeter> {
        let dir = root.join("sys/class/powercap");
        let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("intel-rapl:") && n.matches(':').count() == 1)
            .collect();
        names.sort();
        let mut zones = Vec::new();
        for name in names {
            let zone = dir.join(&name);
            let energy = zone.join("energy_uj");
            let first = read_num::<u64>(&energy)?;
            let range_uj = read_num::<u64>(&zone.join("max_energy_range_uj")).unwrap_or(u64::MAX);
            zones.push(RaplZone { energy, range_uj, state: Mutex::new((first, 0)) });
        }
        if zones.is_empty() {
            return Err(Error::Energy(format!("no RAPL zones under {}", dir.display())));
        }
        Ok(RaplMeter { zones })
    }
}

impl EnergyMeter for RaplMeter {
    fn name(&self) -> &str {
        "rapl"
    }
    fn kind(&self) -> EnergyKind {
        EnergyKind::Measured
    }
    fn total_joules(&self) -> Result<f64> {
        let mut total_uj = 0u64;
        for z in &self.zones {
            let raw = read_num::<u64>(&z.energy)?;
            let mut st = z.state.lock().unwrap_or_else(|p| p.into_inner());
            let (last, acc) = *st;
            let delta = if raw >= last { raw - last } else { z.range_uj.saturating_sub(last).saturating_add(raw) };
            *st = (raw, acc.saturating_add(delta));
            total_uj = total_uj.saturating_add(st.1);
        }
        Ok(total_uj as f64 * 1e-6)
    }
}

/// Instantaneous power, sampled by [`PolledMeter`].
pub trait PowerSource: Send + 'static {
    fn watts(&mut self) -> Result<f64>;
}

/// Integrates a [`PowerSource`] sampled every `POLL_INTERVAL` on its own thread (trapezoids
/// between samples; the last sample is held up to the moment of reading).
pub struct PolledMeter {
    name: String,
    state: Arc<Mutex<Integral>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Integral {
    joules: f64,
    last: Option<(Instant, f64)>,
    error: Option<String>,
}

impl PolledMeter {
    /// Takes one sample now (so a source that cannot be read fails here), then polls.
    pub fn start(name: String, mut source: Box<dyn PowerSource>) -> Result<PolledMeter> {
        let first = source.watts()?;
        let state = Arc::new(Mutex::new(Integral { last: Some((Instant::now(), first)), ..Default::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("tern-energy-meter".into())
                .spawn(move || {
                    while !stop.load(Ordering::Acquire) {
                        std::thread::sleep(POLL_INTERVAL);
                        let sample = source.watts();
                        let now = Instant::now();
                        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                        match sample {
                            Ok(w) => {
                                if let Some((t, w0)) = st.last {
                                    st.joules += 0.5 * (w0 + w) * (now - t).as_secs_f64();
                                }
                                st.last = Some((now, w));
                                st.error = None;
                            }
                            Err(e) => st.error = Some(e.to_string()),
                        }
                    }
                })
                .map_err(|e| Error::Energy(format!("cannot start the meter thread: {e}")))?
        };
        Ok(PolledMeter { name, state, stop, thread: Some(thread) })
    }
}

impl EnergyMeter for PolledMeter {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> EnergyKind {
        EnergyKind::Measured
    }
    fn total_joules(&self) -> Result<f64> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = &st.error {
            return Err(Error::Energy(format!("{}: {e}", self.name)));
        }
        let tail = st.last.map_or(0.0, |(t, w)| w * t.elapsed().as_secs_f64());
        Ok(st.joules + tail)
    }
}

impl Drop for PolledMeter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A battery in `/sys/class/power_supply`, while it powers the device (discharging).
pub(crate) struct PowerSupplySource {
    dir: PathBuf,
}

impl PowerSupplySource {
    /// The first supply of type `Battery` under `root/sys/class/power_supply`.
    pub fn find(root: &Path) -> Result<PowerSupplySource> {
        let dir = root.join("sys/class/power_supply");
        let entries = std::fs::read_dir(&dir).map_err(|source| Error::Io { path: dir.clone(), source })?;
        let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        dirs.sort();
        dirs.into_iter()
            .find(|d| std::fs::read_to_string(d.join("type")).is_ok_and(|t| t.trim() == "Battery"))
            .map(|dir| PowerSupplySource { dir })
            .ok_or_else(|| Error::Energy(format!("no battery under {}", dir.display())))
    }

    pub fn name(&self) -> String {
        format!("battery {}", self.dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
    }
}

impl PowerSource for PowerSupplySource {
    fn watts(&mut self) -> Result<f64> {
        let status = std::fs::read_to_string(self.dir.join("status")).unwrap_or_default();
        if matches!(status.trim(), "Charging" | "Full" | "Not charging") {
            return Err(Error::Energy("the battery is charging: it does not show what the device draws".into()));
        }
        // power_now in µW where the driver has it, else current (µA) × voltage (µV). Drivers
        // differ in sign while discharging, so magnitudes are used.
        if let Ok(uw) = read_num::<i64>(&self.dir.join("power_now")) {
            return Ok(uw.unsigned_abs() as f64 * 1e-6);
        }
        let ua = read_num::<i64>(&self.dir.join("current_now"))?;
        let uv = read_num::<i64>(&self.dir.join("voltage_now"))?;
        Ok(ua.unsigned_abs() as f64 * 1e-6 * uv.unsigned_abs() as f64 * 1e-6)
    }
}

/// The power model integrated over time: what the selection in use should draw.
pub(crate) struct EstimatedMeter {
    topology: CpuTopology,
    model: PowerModel,
    state: Mutex<(Instant, f64, f64)>,
}

impl EstimatedMeter {
    pub fn new(topology: CpuTopology) -> EstimatedMeter {
        let model = PowerModel::for_topology(&topology);
        let watts = model.watts_for(&topology, None);
        EstimatedMeter { topology, model, state: Mutex::new((Instant::now(), 0.0, watts)) }
    }

    /// Estimated watts on `selection`.
    pub fn watts(&self, selection: Option<&CoreSelection>) -> f64 {
        self.model.watts_for(&self.topology, selection)
    }
}

impl EnergyMeter for EstimatedMeter {
    fn name(&self) -> &str {
        "estimate (power model)"
    }
    fn kind(&self) -> EnergyKind {
        EnergyKind::Estimated
    }
    fn total_joules(&self) -> Result<f64> {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        st.1 += st.2 * (now - st.0).as_secs_f64();
        st.0 = now;
        Ok(st.1)
    }
    fn note_selection(&self, selection: Option<&CoreSelection>) {
        let _ = self.total_joules();
        let watts = self.watts(selection);
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2 = watts;
    }
}

static INSTALLED: OnceLock<Mutex<Option<Arc<dyn EnergyMeter>>>> = OnceLock::new();

/// Makes `meter` the one engines loaded from now on use (the Android battery meter, which
/// needs the app's JVM and context, is installed this way).
pub fn install(meter: Arc<dyn EnergyMeter>) {
    *INSTALLED.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner()) = Some(meter);
}

/// The best meter this device offers: an installed one, RAPL, a discharging battery, else the
/// estimate. `root` is `/` except in tests.
pub fn detect(root: &Path, topology: &CpuTopology) -> Arc<dyn EnergyMeter> {
    if let Some(m) = INSTALLED.get().and_then(|m| m.lock().unwrap_or_else(|p| p.into_inner()).clone()) {
        return m;
    }
    if let Ok(m) = RaplMeter::open(root) {
        return Arc::new(m);
    }
    if let Ok(src) = PowerSupplySource::find(root) {
        let name = src.name();
        if let Ok(m) = PolledMeter::start(name, Box::new(src)) {
            return Arc::new(m);
        }
    }
    Arc::new(EstimatedMeter::new(topology.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tern-meter-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn rapl_unwraps_its_counter() {
        let root = temp_root("rapl");
        let zone = root.join("sys/class/powercap/intel-rapl:0");
        write(&zone.join("energy_uj"), "900000\n");
        write(&zone.join("max_energy_range_uj"), "1000000\n");
        write(&root.join("sys/class/powercap/intel-rapl:0:0/energy_uj"), "5\n"); // subzone: ignored
        let m = RaplMeter::open(&root).expect("rapl");
        assert_eq!(m.total_joules().expect("read"), 0.0);
        write(&zone.join("energy_uj"), "950000\n");
        assert!((m.total_joules().expect("read") - 0.05).abs() < 1e-9);
        write(&zone.join("energy_uj"), "50000\n"); // wrapped: 50 000 to the top, 50 000 after
        assert!((m.total_joules().expect("read") - 0.15).abs() < 1e-9);
        write(&zone.join("energy_uj"), "garbage");
        assert!(m.total_joules().is_err());
        assert!(RaplMeter::open(&temp_root("none")).is_err());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn battery_power_from_current_and_voltage() {
        let root = temp_root("battery");
        let bat = root.join("sys/class/power_supply/BAT0");
        write(&root.join("sys/class/power_supply/AC/type"), "Mains\n");
        write(&bat.join("type"), "Battery\n");
        write(&bat.join("status"), "Discharging\n");
        write(&bat.join("current_now"), "-500000\n"); // 0.5 A, negative while discharging
        write(&bat.join("voltage_now"), "4000000\n"); // 4 V
        let mut src = PowerSupplySource::find(&root).expect("battery");
        assert_eq!(src.name(), "battery BAT0");
        assert!((src.watts().expect("watts") - 2.0).abs() < 1e-9);
        let meter =
            PolledMeter::start(src.name(), Box::new(PowerSupplySource::find(&root).expect("battery"))).expect("meter");
        let j0 = meter.total_joules().expect("read");
        std::thread::sleep(Duration::from_millis(300));
        let j = meter.total_joules().expect("read") - j0;
        assert!((0.5..1.5).contains(&j), "about 2 W × 0.3 s, got {j} J");
        write(&bat.join("status"), "Charging\n");
        assert!(src.watts().is_err());
        write(&bat.join("status"), "Discharging\n");
        write(&bat.join("power_now"), "3500000\n");
        assert!((src.watts().expect("watts") - 3.5).abs() < 1e-9);
        drop(meter);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn estimate_follows_the_selection() {
        let topo = CpuTopology::from_clusters("t", &[(2, 1024, 3_000_000, None), (2, 400, 2_000_000, None)]);
        let m = EstimatedMeter::new(topo);
        assert_eq!(m.kind(), EnergyKind::Estimated);
        m.note_selection(Some(&CoreSelection::cores([2])));
        let j0 = m.total_joules().expect("read");
        std::thread::sleep(Duration::from_millis(50));
        let j = m.total_joules().expect("read") - j0;
        let w = m.watts(Some(&CoreSelection::cores([2])));
        assert!(j >= w * 0.045 && j < w * 0.5, "{j} J at {w} W");
        assert!(m.watts(Some(&CoreSelection::cores([0, 1, 2, 3]))) > w);
    }
}
