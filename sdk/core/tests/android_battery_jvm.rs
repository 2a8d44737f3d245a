//! The Android battery meter's JNI calls, run in a desktop JVM against stand-in classes that have
//! the signatures of Android's `Context`, `IntentFilter`, `Intent` and `BatteryManager`
//! (tests/jvm/). This checks the method names, signatures, local-frame handling, units and the
//! integration; how a real phone's gauge behaves is outside what it can show.
//!
//! Needs a JDK (`javac`, and `java` to locate libjvm); run by `cargo xtask test` as
//! `cargo test -p tern --features android-battery --test android_battery_jvm`.
#![cfg(feature = "android-battery")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use jni::objects::JValue;
use jni::{InitArgsBuilder, JNIVersion, JavaVM};
use tern::energy::android::start_battery_meter;
use tern::energy::EnergyMeter;

fn compile_stand_ins(out: &Path) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/jvm");
    let files: Vec<PathBuf> = ["android/content/Context.java", "android/content/BroadcastReceiver.java"]
        .iter()
        .chain(&["android/content/IntentFilter.java", "android/content/Intent.java", "android/os/BatteryManager.java"])
        .map(|f| src.join(f))
        .collect();
    let status = Command::new("javac").arg("-d").arg(out).args(&files).status().expect("javac (a JDK) is installed");
    assert!(status.success(), "javac failed");
}

#[test]
fn battery_manager_current_and_voltage_are_integrated() {
    let classes = std::env::temp_dir().join(format!("tern-jvm-{}", std::process::id()));
    compile_stand_ins(&classes);
    let args = InitArgsBuilder::new()
        .version(JNIVersion::V8)
        .option(format!("-Djava.class.path={}", classes.display()))
        .build()
        .expect("JVM arguments");
    let vm = JavaVM::new(args).expect("a JVM starts");
    let mut env = vm.attach_current_thread().expect("attach");
    let set = |env: &mut jni::JNIEnv, ua: i32, mv: i32, plugged: i32| {
        env.call_static_method(
            "android/os/BatteryManager",
            "set",
            "(III)V",
            &[JValue::Int(ua), JValue::Int(mv), JValue::Int(plugged)],
        )
        .expect("set the stand-in gauge");
    };
    // 0.5 A out of the battery (negative, as documented) at 4 V: 2 W.
    set(&mut env, -500_000, 4000, 0);
    let context = env.new_object("android/content/Context", "()V", &[]).expect("context");
    let context = env.new_global_ref(context).expect("global ref");
    // SAFETY: the pointer comes from a live JavaVM that outlives the meter (the process's JVM).
    let meter_vm = unsafe { JavaVM::from_raw(vm.get_java_vm_pointer()) }.expect("vm handle");
    let meter = start_battery_meter(meter_vm, context).expect("meter starts");
    assert_eq!(meter.name(), "android battery");
    let j0 = meter.total_joules().expect("read");
    std::thread::sleep(Duration::from_millis(500));
    let joules = meter.total_joules().expect("read") - j0;
    assert!((0.8..1.6).contains(&joules), "about 2 W for 0.5 s, got {joules} J");

    // Phones that report milliamperes: 300 mA at 4 V = 1.2 W.
    set(&mut env, 300, 4000, 0);
    std::thread::sleep(Duration::from_millis(200));
    let j1 = meter.total_joules().expect("read");
    std::thread::sleep(Duration::from_millis(500));
    let watts = (meter.total_joules().expect("read") - j1) / 0.5;
    assert!((0.8..1.6).contains(&watts), "about 1.2 W, got {watts} W");

    // Plugged in: the gauge no longer shows what the phone draws, and the meter says so (the
    // voltage and plug state are re-read once a second).
    set(&mut env, 800_000, 4200, 1);
    std::thread::sleep(Duration::from_millis(1300));
    assert!(meter.total_joules().is_err(), "charging must not read as consumption");
    drop(meter);
    let _ = std::fs::remove_dir_all(&classes);
}
