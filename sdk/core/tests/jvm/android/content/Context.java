package android.content;

/** Stand-in with the signatures of Android's Context that the battery meter calls. */
public class Context {
    public Object getSystemService(String name) {
        return "batterymanager".equals(name) ? new android.os.BatteryManager() : null;
    }

    public Intent registerReceiver(BroadcastReceiver receiver, IntentFilter filter) {
        return filter.action.equals("android.intent.action.BATTERY_CHANGED") ? new Intent() : null;
    }
}
