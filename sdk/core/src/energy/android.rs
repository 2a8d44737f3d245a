//! Android's battery gauge through JNI: `BatteryManager.getIntProperty(CURRENT_NOW)` (µA) and
//! the voltage of the sticky `ACTION_BATTERY_CHANGED` intent (mV), sampled every 50 ms on the
//! meter's thread and integrated (the OS refreshes the gauge about every 250 ms, so probes
//! shorter than half a second are imprecise). No root needed.
//!
//! The Android bindings start it with the app's `JavaVM` and an application `Context`, then
//! [`super::meter::install`] it before loading an engine.

use std::sync::Arc;

use jni::objects::{GlobalRef, JObject, JValue};
use jni::JavaVM;

use super::meter::{PolledMeter, PowerSource};
use crate::error::{Error, Result};

/// `BatteryManager.BATTERY_PROPERTY_CURRENT_NOW`.
const BATTERY_PROPERTY_CURRENT_NOW: i32 = 2;
/// The voltage changes slowly: read it once per this many current samples.
const VOLTAGE_EVERY: u32 = 20;

/// Starts the battery meter. `context` must be an `android.content.Context`.
pub fn start_battery_meter(vm: JavaVM, context: GlobalRef) -> Result<PolledMeter> {
    let manager = {
        let mut env = vm.attach_current_thread_as_daemon().map_err(jni_error)?;
        let name = env.new_string("batterymanager").map_err(jni_error)?;
        let obj = env
            .call_method(
                context.as_obj(),
                "getSystemService",
                "(Ljava/lang/String;)Ljava/lang/Object;",
                &[JValue::Object(&name)],
            )
            .and_then(|v| v.l())
            .map_err(|e| clear(&mut env, e))?;
        if obj.is_null() {
            return Err(Error::Energy("this device has no BatteryManager".into()));
        }
        env.new_global_ref(obj).map_err(jni_error)?
    };
    let source = BatterySource { vm: Arc::new(vm), context, manager, volts: None, samples: 0 };
    PolledMeter::start("android battery".into(), Box::new(source))
}

struct BatterySource {
    vm: Arc<JavaVM>,
    context: GlobalRef,
    manager: GlobalRef,
    volts: Option<f64>,
    samples: u32,
}

impl BatterySource {
    /// (volts, plugged in) from the sticky battery intent.
    fn battery_intent(&self, env: &mut jni::JNIEnv) -> Result<(f64, bool)> {
        let framed = env.with_local_frame(8, |env| -> std::result::Result<(f64, bool), Failure> {
            let action = env.new_string("android.intent.action.BATTERY_CHANGED").map_err(jni_error)?;
            let filter = env
                .new_object("android/content/IntentFilter", "(Ljava/lang/String;)V", &[JValue::Object(&action)])
                .map_err(|e| clear(env, e))?;
            let null = JObject::null();
            let intent = env
                .call_method(
                    self.context.as_obj(),
                    "registerReceiver",
                    "(Landroid/content/BroadcastReceiver;Landroid/content/IntentFilter;)Landroid/content/Intent;",
                    &[JValue::Object(&null), JValue::Object(&filter)],
                )
                .and_then(|v| v.l())
                .map_err(|e| clear(env, e))?;
            if intent.is_null() {
                return Err(Failure(Error::Energy("no battery state broadcast".into())));
            }
            let mut int_extra = |key: &str| -> Result<i32> {
                let key = env.new_string(key).map_err(jni_error)?;
                env.call_method(
                    &intent,
                    "getIntExtra",
                    "(Ljava/lang/String;I)I",
                    &[JValue::Object(&key), JValue::Int(0)],
                )
                .and_then(|v| v.i())
                .map_err(|e| clear(env, e))
            };
            let millivolts = int_extra("voltage")?;
            let plugged = int_extra("plugged")? != 0;
            Ok((millivolts.max(0) as f64 * 1e-3, plugged))
        });
        framed.map_err(|f| f.0)
    }
}

impl PowerSource for BatterySource {
    fn watts(&mut self) -> Result<f64> {
        let vm = Arc::clone(&self.vm);
        let mut env = vm.attach_current_thread_as_daemon().map_err(jni_error)?;
        if self.volts.is_none() || self.samples % VOLTAGE_EVERY == 0 {
            let (volts, plugged) = self.battery_intent(&mut env)?;
            if plugged {
                return Err(Error::Energy("the phone is charging: the gauge does not show what it draws".into()));
            }
            self.volts = Some(volts);
        }
        self.samples = self.samples.wrapping_add(1);
        let current = env
            .call_method(self.manager.as_obj(), "getIntProperty", "(I)I", &[JValue::Int(BATTERY_PROPERTY_CURRENT_NOW)])
            .and_then(|v| v.i())
            .map_err(|e| clear(&mut env, e))?;
        // Negative while discharging by the documentation; some phones report positive values,
        // and a few milliamperes instead of microamperes (a phone never draws under 10 mA).
        let amps = match current.unsigned_abs() as f64 {
            a if a < 10_000.0 => a * 1e-3,
            a => a * 1e-6,
        };
        Ok(amps * self.volts.unwrap_or(0.0))
    }
}

/// The error type of a JNI local frame (it must take JNI errors in).
struct Failure(Error);

impl From<jni::errors::Error> for Failure {
    fn from(e: jni::errors::Error) -> Self {
        Failure(jni_error(e))
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure(e)
    }
}

fn jni_error(e: jni::errors::Error) -> Error {
    Error::Energy(format!("JNI: {e}"))
}

/// A Java exception must be cleared before the thread calls into Java again.
fn clear(env: &mut jni::JNIEnv, e: jni::errors::Error) -> Error {
    if matches!(e, jni::errors::Error::JavaException) {
        let _ = env.exception_clear();
    }
    jni_error(e)
}
